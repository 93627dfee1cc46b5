//! A fast reader for `dump.json`: Python-flavoured JSON parsed straight into borrowed values.
//!
//! `dump.json` is by far the largest input (tens of MB), and going through `serde_json::Value`
//! costs an allocation for every key and string, a hash map per object and a full copy of the
//! file whenever it contains `NaN`/`Infinity`. This parser reads the bytes in place: strings
//! without escapes are borrowed, objects are small vectors, numbers are classified exactly as
//! `serde_json` classifies them (so that Python's `int`/`float` distinction is kept), and bare
//! `NaN`/`Infinity`/`-Infinity` are read as floats. Anything it does not accept is reported as an
//! error, and callers then fall back to the `serde_json` reader, which gives the user-facing
//! message: the fast path never decides what a bad file means.

use std::borrow::Cow;

use serde_json::Value;

/// A parsed JSON value borrowing from the input.
#[derive(Debug, Clone, PartialEq)]
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
    /// Keys in file order; a repeated key keeps its first position and its last value.
    Obj(Vec<(Cow<'a, str>, JVal<'a>)>),
}

impl<'a> JVal<'a> {
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
            JVal::Arr(a) => Value::Array(a.iter().map(JVal::to_value).collect()),
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

type Res<T> = Result<T, FastError>;

/// A cursor over the input.
pub struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    /// A parser over UTF-8 text (`None` when the bytes are not UTF-8).
    pub fn new(bytes: &'a [u8]) -> Option<Parser<'a>> {
        let text = std::str::from_utf8(bytes).ok()?;
        Some(Parser {
            text,
            bytes,
            pos: 0,
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

    /// Parses one value.
    pub fn value(&mut self) -> Res<JVal<'a>> {
        match self.peek() {
            None => self.err("unexpected end"),
            Some(b'{') => {
                self.pos += 1;
                let mut fields: Vec<(Cow<'a, str>, JVal<'a>)> = Vec::new();
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                    return Ok(JVal::Obj(fields));
                }
                loop {
                    let key = self.key()?;
                    let v = self.value()?;
                    match fields.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, old)) => *old = v,
                        None => fields.push((key, v)),
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
                self.pos += 1;
                let mut items = Vec::new();
                if self.peek() == Some(b']') {
                    self.pos += 1;
                    return Ok(JVal::Arr(items));
                }
                loop {
                    items.push(self.value()?);
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {
                            self.pos += 1;
                            return Ok(JVal::Arr(items));
                        }
                        _ => return self.err("expected , or ]"),
                    }
                }
            }
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

    /// After `{`: `true` if a key follows, `false` at `}` (consumed). Between members, eats
    /// the `,`.
    pub fn next_member(&mut self, first: bool) -> Res<bool> {
        match self.peek() {
            Some(b'}') => {
                self.pos += 1;
                Ok(false)
            }
            Some(b',') if !first => {
                self.pos += 1;
                Ok(true)
            }
            Some(b'"') if first => Ok(true),
            _ => self.err("expected a member"),
        }
    }

    /// Consumes `{`.
    pub fn begin_object(&mut self) -> Res<()> {
        self.expect(b'{')
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
fn memchr_quote_or_escape(s: &[u8]) -> Option<usize> {
    s.iter().position(|&b| b == b'"' || b == b'\\')
}

/// The header of a `dump.json` read by [`read_dump`].
#[derive(Debug, Default)]
pub struct DumpHeader {
    pub task: Option<String>,
    pub level: Option<String>,
    pub framework: Option<String>,
    pub dump_data_dir: Option<String>,
}

/// Streams `dump.json` bytes: `visit(name, entry)` for each entry of `data`, in file order.
/// Any deviation from the expected shape (top-level object with a `data` object whose entries
/// are objects or null) is an error, as is any JSON error: the caller then uses the
/// `serde_json` reader to report it.
pub fn read_dump<'a>(
    bytes: &'a [u8],
    visit: &mut dyn FnMut(&str, &JVal<'a>),
) -> Result<DumpHeader, FastError> {
    let Some(mut p) = Parser::new(bytes) else {
        return Err(FastError {
            offset: 0,
            message: "not UTF-8",
        });
    };
    let mut h = DumpHeader::default();
    let mut has_data = false;
    p.begin_object()?;
    let mut first = true;
    while p.next_member(first)? {
        first = false;
        let key = p.key()?;
        if key == "data" {
            has_data = true;
            if p.peek() != Some(b'{') {
                return p.err("data is not an object");
            }
            p.begin_object()?;
            let mut first_entry = true;
            while p.next_member(first_entry)? {
                first_entry = false;
                let name = p.key()?;
                let entry = p.value()?;
                if !matches!(entry, JVal::Obj(_) | JVal::Null) {
                    return p.err("entry is not an object");
                }
                visit(&name, &entry);
            }
        } else {
            let v = p.value()?;
            let text = |v: JVal| v.as_str().map(str::to_string);
            match key.as_ref() {
                "task" => h.task = text(v),
                "level" => h.level = text(v),
                "framework" => h.framework = text(v),
                "dump_data_dir" => h.dump_data_dir = text(v),
                _ => {}
            }
        }
    }
    if !p.at_end() {
        return p.err("trailing characters");
    }
    if !has_data {
        return p.err("no data");
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> JVal<'_> {
        let mut p = Parser::new(s.as_bytes()).unwrap();
        let v = p.value().unwrap();
        assert!(p.at_end());
        v
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

    #[test]
    fn dump_stream() {
        let text = br#"{"task": "statistics", "data": {"b": {"output": [{"type": "torch.Tensor", "Max": NaN}]}, "a": {}, "c": null}, "framework": "mindspore"}"#;
        let mut names = Vec::new();
        let h = read_dump(text, &mut |k, _| names.push(k.to_string())).unwrap();
        assert_eq!(names, ["b", "a", "c"]);
        assert_eq!(h.task.as_deref(), Some("statistics"));
        assert_eq!(h.framework.as_deref(), Some("mindspore"));
        assert!(read_dump(br#"{"data": {"x": 3}}"#, &mut |_, _| {}).is_err());
        assert!(read_dump(br#"{"task": "x"}"#, &mut |_, _| {}).is_err());
        assert!(read_dump(br#"[1]"#, &mut |_, _| {}).is_err());
    }
}
