//! JSON text parsed in place into [`JVal`]: the value type, and the parser that builds it (a
//! long array's elements are parsed again from its text when walked, so the two go together).

use std::borrow::Cow;

use serde_json::Value;

/// A parsed JSON value borrowing from the input.
#[derive(Debug, Clone)]
pub enum JVal<'a> {
    Null,
    Bool(bool),
    /// An integer that fits `i64`.
    Int(i64),
    /// An integer above `i64::MAX` that fits `u64`.
    BigUint(u64),
    Float(f64),
    /// A bare `NaN`/`Infinity`/`-Infinity` token: a float, but (as in the `serde_json` path,
    /// where it is a marker string) it counts as a string for "is this a leaf" tests.
    NonFinite(f64),
    Str(Cow<'a, str>),
    Arr(Vec<JVal<'a>>),
    /// An array whose text is longer than [`LAZY_ARRAY_BYTES`]: checked when parsed, kept as
    /// its text, and parsed again one element at a time when it is walked
    /// ([`JVal::elements`]). A tree costs 32 bytes an element (a `shape` of 64M numbers
    /// would be 2 GB for 128 MB of text); the text costs nothing more.
    LazyArr(LazyArr<'a>),
    /// Keys in file order; a repeated key keeps its first position and its last value.
    Obj(Vec<(Cow<'a, str>, JVal<'a>)>),
}

/// Where each key of an object being parsed sits, to find a repeated key (whose last value wins
/// at its first place, as in `serde_json` and Python): a walk over the few fields of a small
/// object, a hash table past [`KeyPositions::SMALL`] fields, so that an object of very many
/// keys parses in linear time, not quadratic.
#[derive(Default)]
struct KeyPositions<'a> {
    table: Option<crate::fast_map::FastMap<Cow<'a, str>, usize>>,
}

impl<'a> KeyPositions<'a> {
    /// Objects of up to this many fields are searched field by field.
    const SMALL: usize = 16;

    /// The place of `key` among `fields`.
    fn find(&mut self, fields: &[(Cow<'a, str>, JVal<'a>)], key: &str) -> Option<usize> {
        #[cfg(test)]
        tests::KEYS_LOOKED_AT.with(|n| {
            n.set(
                n.get()
                    + if self.table.is_some() {
                        1
                    } else {
                        fields.len() as u64
                    },
            )
        });
        if self.table.is_none() && fields.len() > Self::SMALL {
            self.table = Some(
                fields
                    .iter()
                    .enumerate()
                    .map(|(i, (k, _))| (k.clone(), i))
                    .collect(),
            );
        }
        match &self.table {
            Some(table) => table.get(key).copied(),
            None => fields.iter().position(|(k, _)| k == key),
        }
    }

    /// Notes the last of `fields`, just added (once the table is in use).
    fn added(&mut self, fields: &[(Cow<'a, str>, JVal<'a>)]) {
        if let (Some(table), Some((key, _))) = (&mut self.table, fields.last()) {
            table.insert(key.clone(), fields.len() - 1);
        }
    }
}

/// Arrays whose text is at least this long are kept as text ([`JVal::LazyArr`]): a tree of
/// such an array is never held whole, only the tree of one element at a time.
pub const LAZY_ARRAY_BYTES: usize = 64 << 10;

/// The text of a long array (from `[` to `]`, already checked) and its element count.
#[derive(Debug, Clone, PartialEq)]
pub struct LazyArr<'a> {
    text: &'a str,
    len: usize,
}

impl<'a> LazyArr<'a> {
    /// How many elements the array has.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The elements of an array ([`JVal::elements`]): borrowed from a tree, or parsed one at a
/// time from a [`JVal::LazyArr`]'s text.
pub enum Elements<'v, 'a> {
    Tree(std::slice::Iter<'v, JVal<'a>>),
    Text { parser: Parser<'a>, first: bool },
    None,
}

impl<'v, 'a> Iterator for Elements<'v, 'a> {
    type Item = Cow<'v, JVal<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Elements::Tree(it) => it.next().map(Cow::Borrowed),
            Elements::Text { parser, first } => {
                // The text was checked when it was first parsed: an error here cannot happen,
                // and would only end the walk early.
                match parser.peek() {
                    Some(b']') | None => return None,
                    Some(b',') if !*first => parser.pos += 1,
                    Some(_) if *first => {}
                    Some(_) => return None,
                }
                *first = false;
                parser.value().ok().map(Cow::Owned)
            }
            Elements::None => None,
        }
    }
}

impl PartialEq for JVal<'_> {
    /// Values, not representations: a [`JVal::LazyArr`] equals the [`JVal::Arr`] of the same
    /// elements.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (JVal::Null, JVal::Null) => true,
            (JVal::Bool(a), JVal::Bool(b)) => a == b,
            (JVal::Int(a), JVal::Int(b)) => a == b,
            (JVal::BigUint(a), JVal::BigUint(b)) => a == b,
            (JVal::Float(a), JVal::Float(b)) | (JVal::NonFinite(a), JVal::NonFinite(b)) => a == b,
            (JVal::Str(a), JVal::Str(b)) => a == b,
            (JVal::Obj(a), JVal::Obj(b)) => a == b,
            (a, b) if a.is_array() && b.is_array() => {
                a.array_len() == b.array_len() && a.elements().eq(b.elements())
            }
            _ => false,
        }
    }
}

impl<'a> JVal<'a> {
    /// `true` for an array (held as a tree or as text).
    pub fn is_array(&self) -> bool {
        matches!(self, JVal::Arr(_) | JVal::LazyArr(_))
    }

    /// The element count of an array (0 for other values).
    pub fn array_len(&self) -> usize {
        match self {
            JVal::Arr(a) => a.len(),
            JVal::LazyArr(a) => a.len,
            _ => 0,
        }
    }

    /// The elements of an array, in order (none for other values).
    pub fn elements(&self) -> Elements<'_, 'a> {
        match self {
            JVal::Arr(a) => Elements::Tree(a.iter()),
            JVal::LazyArr(a) => match Parser::new(a.text.as_bytes()) {
                Some(mut parser) => {
                    parser.pos = 1;
                    Elements::Text {
                        parser,
                        first: true,
                    }
                }
                None => Elements::None,
            },
            _ => Elements::None,
        }
    }

    /// The value of a key of an object.
    pub fn get(&self, key: &str) -> Option<&JVal<'a>> {
        match self {
            JVal::Obj(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// `serde_json::Value::is_string` of the equivalent value in the `serde_json` path.
    pub fn is_string(&self) -> bool {
        matches!(self, JVal::Str(_) | JVal::NonFinite(_))
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            JVal::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The same value borrowing from a `serde_json::Value` (non-finite markers become floats).
    pub fn from_value(v: &'a Value) -> JVal<'a> {
        match v {
            Value::Null => JVal::Null,
            Value::Bool(b) => JVal::Bool(*b),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    JVal::Int(i)
                } else if let Some(u) = n.as_u64() {
                    JVal::BigUint(u)
                } else {
                    JVal::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => match crate::json::non_finite_marker(s) {
                Some(f) => JVal::NonFinite(f),
                None => JVal::Str(Cow::Borrowed(s)),
            },
            Value::Array(a) => JVal::Arr(a.iter().map(JVal::from_value).collect()),
            Value::Object(o) => JVal::Obj(
                o.iter()
                    .map(|(k, v)| (Cow::Borrowed(k.as_str()), JVal::from_value(v)))
                    .collect(),
            ),
        }
    }

    /// The equivalent `serde_json::Value` (non-finite floats as the reader's marker strings).
    pub fn to_value(&self) -> Value {
        match self {
            JVal::Null => Value::Null,
            JVal::Bool(b) => Value::Bool(*b),
            JVal::Int(i) => Value::from(*i),
            JVal::BigUint(u) => Value::from(*u),
            JVal::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            JVal::NonFinite(f) => Value::String(crate::json::marker_of(*f)),
            JVal::Str(s) => Value::String(s.to_string()),
            JVal::Arr(_) | JVal::LazyArr(_) => {
                Value::Array(self.elements().map(|v| v.to_value()).collect())
            }
            JVal::Obj(o) => {
                let mut m = serde_json::Map::new();
                for (k, v) in o {
                    m.insert(k.to_string(), v.to_value());
                }
                Value::Object(m)
            }
        }
    }
}

/// Why the fast parser stopped (only used to decide on the fallback).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FastError {
    pub offset: usize,
    pub message: &'static str,
}

pub(super) type Res<T> = Result<T, FastError>;

/// How deep arrays and objects may nest in one parsed value: `serde_json`'s limit, so that the
/// recursive parser (and dropping what it built) cannot overflow the stack. Deeper input is a
/// fast-path error, so the caller falls back to the `serde_json` reader, which refuses it with
/// a message naming the file.
pub const MAX_DEPTH: usize = 128;

/// A cursor over the input.
pub struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Arrays and objects open at `pos`.
    depth: usize,
}

impl<'a> Parser<'a> {
    /// A parser over UTF-8 text (`None` when the bytes are not UTF-8).
    pub fn new(bytes: &'a [u8]) -> Option<Parser<'a>> {
        let text = std::str::from_utf8(bytes).ok()?;
        Some(Parser {
            text,
            bytes,
            pos: 0,
            depth: 0,
        })
    }

    fn err<T>(&self, message: &'static str) -> Res<T> {
        Err(FastError {
            offset: self.pos,
            message,
        })
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(&b) = self.bytes.get(self.pos) {
            if matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    #[inline]
    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.bytes.get(self.pos).copied()
    }

    fn expect(&mut self, c: u8) -> Res<()> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            self.err("unexpected character")
        }
    }

    /// `true` once only whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    /// Parses one value; arrays and objects nested more than [`MAX_DEPTH`] deep are an error.
    pub fn value(&mut self) -> Res<JVal<'a>> {
        match self.peek() {
            Some(b'{' | b'[') => {
                if self.depth >= MAX_DEPTH {
                    return self.err("nested too deep");
                }
                self.depth += 1;
                let v = self.container();
                self.depth -= 1;
                v
            }
            _ => self.scalar(),
        }
    }

    /// An array or object (at `[` or `{`).
    fn container(&mut self) -> Res<JVal<'a>> {
        match self.peek() {
            Some(b'{') => {
                self.pos += 1;
                let mut fields: Vec<(Cow<'a, str>, JVal<'a>)> = Vec::new();
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                    return Ok(JVal::Obj(fields));
                }
                let mut positions = KeyPositions::default();
                loop {
                    let key = self.key()?;
                    let v = self.value()?;
                    match positions.find(&fields, &key) {
                        Some(i) => fields[i].1 = v,
                        None => {
                            fields.push((key, v));
                            positions.added(&fields);
                        }
                    }
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {
                            self.pos += 1;
                            return Ok(JVal::Obj(fields));
                        }
                        _ => return self.err("expected , or }"),
                    }
                }
            }
            Some(b'[') => {
                let open = self.pos;
                self.pos += 1;
                let mut items = Vec::new();
                if self.peek() == Some(b']') {
                    self.pos += 1;
                    return Ok(JVal::Arr(items));
                }
                // Past LAZY_ARRAY_BYTES of text the elements are only checked and counted.
                let mut counted: Option<usize> = None;
                loop {
                    let v = self.value()?;
                    match &mut counted {
                        Some(n) => *n += 1,
                        None if self.pos - open >= LAZY_ARRAY_BYTES => {
                            counted = Some(items.len() + 1);
                            items = Vec::new();
                        }
                        None => items.push(v),
                    }
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {
                            self.pos += 1;
                            return Ok(match counted {
                                Some(len) => JVal::LazyArr(LazyArr {
                                    text: &self.text[open..self.pos],
                                    len,
                                }),
                                None => JVal::Arr(items),
                            });
                        }
                        _ => return self.err("expected , or ]"),
                    }
                }
            }
            _ => self.scalar(),
        }
    }

    /// A value that is not an array or object.
    fn scalar(&mut self) -> Res<JVal<'a>> {
        match self.peek() {
            None => self.err("unexpected end"),
            Some(b'"') => Ok(JVal::Str(self.string()?)),
            Some(b't') => self.word("true", JVal::Bool(true)),
            Some(b'f') => self.word("false", JVal::Bool(false)),
            Some(b'n') => self.word("null", JVal::Null),
            Some(b'N') => self.word("NaN", JVal::NonFinite(f64::NAN)),
            Some(b'I') => self.word("Infinity", JVal::NonFinite(f64::INFINITY)),
            Some(b'-') if self.bytes[self.pos..].starts_with(b"-Infinity") => {
                self.word("-Infinity", JVal::NonFinite(f64::NEG_INFINITY))
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => self.err("unexpected character"),
        }
    }

    /// An object key and the `:` after it.
    pub fn key(&mut self) -> Res<Cow<'a, str>> {
        if self.peek() != Some(b'"') {
            return self.err("expected a key");
        }
        let k = self.string()?;
        self.expect(b':')?;
        Ok(k)
    }

    fn word(&mut self, w: &str, v: JVal<'a>) -> Res<JVal<'a>> {
        if self.bytes[self.pos..].starts_with(w.as_bytes()) {
            self.pos += w.len();
            Ok(v)
        } else {
            self.err("unknown literal")
        }
    }

    fn string(&mut self) -> Res<Cow<'a, str>> {
        // at the opening quote
        self.pos += 1;
        let start = self.pos;
        let rest = &self.bytes[start..];
        let Some(end) = memchr_quote_or_escape(rest) else {
            return self.err("unterminated string");
        };
        let run = &rest[..end];
        if run.iter().any(|&b| b < 0x20) {
            return self.err("control character in string");
        }
        if rest[end] == b'"' {
            self.pos = start + end + 1;
            return Ok(Cow::Borrowed(&self.text[start..start + end]));
        }
        // Escapes: decode into an owned string.
        let mut out = String::with_capacity(end + 16);
        out.push_str(&self.text[start..start + end]);
        self.pos = start + end;
        loop {
            let Some(&b) = self.bytes.get(self.pos) else {
                return self.err("unterminated string");
            };
            match b {
                b'"' => {
                    self.pos += 1;
                    return Ok(Cow::Owned(out));
                }
                b'\\' => {
                    let Some(&e) = self.bytes.get(self.pos + 1) else {
                        return self.err("unterminated string");
                    };
                    self.pos += 2;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let c = if (0xD800..0xDC00).contains(&hi) {
                                if !self.bytes[self.pos..].starts_with(b"\\u") {
                                    return self.err("lone surrogate");
                                }
                                self.pos += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return self.err("lone surrogate");
                                }
                                char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                            } else if (0xDC00..0xE000).contains(&hi) {
                                return self.err("lone surrogate");
                            } else {
                                char::from_u32(hi)
                            };
                            match c {
                                Some(c) => out.push(c),
                                None => return self.err("bad escape"),
                            }
                        }
                        _ => return self.err("bad escape"),
                    }
                }
                _ => {
                    let rest = &self.bytes[self.pos..];
                    let n = memchr_quote_or_escape(rest).unwrap_or(rest.len());
                    if rest[..n].iter().any(|&b| b < 0x20) {
                        return self.err("control character in string");
                    }
                    out.push_str(&self.text[self.pos..self.pos + n]);
                    self.pos += n;
                }
            }
        }
    }

    fn hex4(&mut self) -> Res<u32> {
        let Some(h) = self.bytes.get(self.pos..self.pos + 4) else {
            return self.err("bad escape");
        };
        let mut v = 0u32;
        for &c in h {
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => return self.err("bad escape"),
            };
            v = v * 16 + u32::from(d);
        }
        self.pos += 4;
        Ok(v)
    }

    /// A number, classified as `serde_json` does: an integer token is `u64` when positive,
    /// `i64` when negative (`-0` and values below `i64::MIN` are floats), and a float when it
    /// overflows; a token with a fraction or an exponent is a correctly rounded float.
    fn number(&mut self) -> Res<JVal<'a>> {
        let start = self.pos;
        let b = self.bytes;
        let mut i = self.pos;
        let negative = b[i] == b'-';
        if negative {
            i += 1;
        }
        let int_start = i;
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while matches!(b.get(i), Some(b'0'..=b'9')) {
                    i += 1;
                }
            }
            _ => return self.err("bad number"),
        }
        let int_end = i;
        let mut float = false;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let f0 = i;
            while matches!(b.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
            if i == f0 {
                return self.err("bad number");
            }
            float = true;
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let e0 = i;
            while matches!(b.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
            if i == e0 {
                return self.err("bad number");
            }
            float = true;
        }
        self.pos = i;
        let token = &self.text[start..i];
        if float {
            return match token.parse::<f64>() {
                Ok(f) if f.is_finite() => Ok(JVal::Float(f)),
                _ => self.err("number out of range"),
            };
        }
        let digits = &self.text[int_start..int_end];
        match digits.parse::<u64>() {
            Ok(sig) => {
                if !negative {
                    Ok(match i64::try_from(sig) {
                        Ok(i) => JVal::Int(i),
                        Err(_) => JVal::BigUint(sig),
                    })
                } else {
                    let neg = (sig as i64).wrapping_neg();
                    if neg >= 0 {
                        Ok(JVal::Float(-(sig as f64)))
                    } else {
                        Ok(JVal::Int(neg))
                    }
                }
            }
            Err(_) => match token.parse::<f64>() {
                Ok(f) if f.is_finite() => Ok(JVal::Float(f)),
                _ => self.err("number out of range"),
            },
        }
    }
}

/// Position of the first `"` or `\` in `s`.
#[inline]
pub(super) fn memchr_quote_or_escape(s: &[u8]) -> Option<usize> {
    s.iter().position(|&b| b == b'"' || b == b'\\')
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    thread_local! {
        /// How many fields [`KeyPositions::find`] compared keys with (a table lookup counts
        /// one): the many-keys test bounds it, not its time.
        pub(super) static KEYS_LOOKED_AT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// `s` parsed as one whole value.
    pub(in crate::fastjson) fn parse(s: &str) -> JVal<'_> {
        let mut p = Parser::new(s.as_bytes()).unwrap();
        let v = p.value().unwrap();
        assert!(p.at_end());
        v
    }

    /// Regression: an object of very many distinct keys parsed in quadratic time (each key was
    /// compared with every earlier one: 300k keys, 4.5e10 comparisons, a minute or more). It is
    /// linear now: the test counts the keys looked at, not the time. Repeated keys, around the
    /// switch to the table too, keep their first place and their last value, as `serde_json`
    /// does.
    #[test]
    fn an_object_of_many_keys_parses_in_linear_time() {
        let n = 300_000;
        let mut text = String::from("{");
        for i in 0..n {
            text.push_str(&format!("\"key number {i}\": {i}, "));
        }
        text.push_str("\"key number 7\": -1}");
        KEYS_LOOKED_AT.with(|n| n.set(0));
        let v = parse(&text);
        // Each key is compared with at most the first `SMALL + 1` fields, then found in the
        // table: linear. The old field-by-field search looked at n²/2 keys (4.5e10 here).
        let looked_at = KEYS_LOOKED_AT.with(|n| n.get());
        let bound = (KeyPositions::SMALL as u64 + 2) * (n as u64 + 1);
        assert!(
            looked_at <= bound,
            "{looked_at} keys looked at, over {bound}"
        );
        let JVal::Obj(fields) = &v else {
            panic!("an object")
        };
        assert_eq!(fields.len(), n);
        assert_eq!(v.get("key number 7"), Some(&JVal::Int(-1)));
        assert_eq!(fields[7].0, "key number 7");
        assert_eq!(v.get("key number 299999"), Some(&JVal::Int(299_999)));
        for count in [3, 16, 17, 18, 40] {
            let mut text = String::from("{");
            for i in 0..count {
                text.push_str(&format!("\"k{i}\": {i}, \"k{}\": {i}, ", i / 2));
            }
            text.push_str("\"end\": 0}");
            let ours = parse(&text).to_value();
            let theirs: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(ours, theirs, "{count}");
            assert_eq!(
                ours.as_object().unwrap().keys().collect::<Vec<_>>(),
                theirs.as_object().unwrap().keys().collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn numbers_are_classified_like_serde_json() {
        for text in [
            "0",
            "-0",
            "12",
            "-12",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "1.5",
            "-0.0",
            "1e5",
            "1E-7",
            "2.7939677238464355e-09",
            "0.1",
            "123456789012345678901234567890",
        ] {
            let serde: Value = serde_json::from_str(text).unwrap();
            assert_eq!(parse(text), JVal::from_value(&serde), "{text}");
        }
    }

    #[test]
    fn strings_objects_and_python_tokens() {
        let text = r#"{"a": "x\"y\u00e9\ud83d\ude00", "b": [NaN, -Infinity, Infinity, null, true], "a": 1}"#;
        let v = parse(text);
        let JVal::Obj(fields) = &v else {
            panic!("{v:?}")
        };
        assert_eq!(fields.len(), 2);
        assert_eq!(fields[0].1, JVal::Int(1));
        let JVal::Arr(list) = &fields[1].1 else {
            panic!()
        };
        assert!(matches!(list[0], JVal::NonFinite(f) if f.is_nan()));
        assert_eq!(list[1], JVal::NonFinite(f64::NEG_INFINITY));
        assert_eq!(
            parse(r#""x\"y\u00e9\ud83d\ude00/\/""#),
            JVal::Str("x\"y\u{e9}\u{1F600}//".into())
        );
    }

    #[test]
    fn bad_input_is_an_error() {
        for text in [
            "{",
            "[1,]",
            "01",
            "1.",
            "\"a",
            "\"\\ud800\"",
            "{\"a\" 1}",
            "-",
            "nul",
            "1e999",
        ] {
            let mut p = Parser::new(text.as_bytes()).unwrap();
            let ok = p.value().is_ok() && p.at_end();
            assert!(!ok, "{text}");
        }
    }
}
