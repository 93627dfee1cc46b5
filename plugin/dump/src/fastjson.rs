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
    /// would be 2 GB for 128 MB of text); the text costs nothing more (issue 14, defect 4).
    LazyArr(LazyArr<'a>),
    /// Keys in file order; a repeated key keeps its first position and its last value.
    Obj(Vec<(Cow<'a, str>, JVal<'a>)>),
}

/// Where each key of an object being parsed sits, to find a repeated key (whose last value wins
/// at its first place, as in `serde_json` and Python): a walk over the few fields of a small
/// object, a hash table past [`KeyPositions::SMALL`] fields, so that an object of very many
/// keys parses in linear time, not quadratic (issue 14).
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

type Res<T> = Result<T, FastError>;

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
pub fn read_dump(
    bytes: &[u8],
    visit: &mut dyn FnMut(&str, &JVal<'_>),
) -> Result<DumpHeader, FastError> {
    read_dump_from(bytes, visit)
}

/// How much is read from the file at a time.
const CHUNK: usize = 1 << 20;

/// A window on the input: only the entry being parsed (and what follows it in the current
/// chunk) is in memory, never the whole file.
struct Window<R> {
    src: R,
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
    /// Bytes dropped from the front of `buf` so far (for error offsets).
    base: usize,
}

impl<R: std::io::Read> Window<R> {
    fn err<T>(&self, message: &'static str) -> Res<T> {
        Err(FastError {
            offset: self.base + self.pos,
            message,
        })
    }

    /// Reads more input (dropping what was consumed); `false` at the end of the input.
    fn fill(&mut self) -> Res<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.base += self.pos;
            self.pos = 0;
        }
        let old = self.buf.len();
        // A value longer than a chunk doubles the window until it fits; once it is consumed,
        // the room it took is given back, so that one long line costs memory only while it
        // is read. Bytes are read into the spare room as they come (never zeroed first), so a
        // window costs what it holds.
        let want = CHUNK.max(old);
        if self.buf.capacity() > 4 * (old + want) {
            self.buf.shrink_to(old + want);
        }
        self.buf.reserve_exact(want);
        use std::io::Read;
        match (&mut self.src).take(want as u64).read_to_end(&mut self.buf) {
            Ok(got) => {
                if got < want {
                    self.eof = true;
                }
                Ok(got > 0)
            }
            Err(_) => self.err("read error"),
        }
    }

    /// Takes the bytes `a..b` of the window out of it (moved, not copied: a long entry is
    /// never held twice); the window keeps what follows `b`.
    fn take_span(&mut self, a: usize, b: usize) -> Vec<u8> {
        let tail = self.buf.get(b..).map(<[u8]>::to_vec).unwrap_or_default();
        self.buf.truncate(b);
        self.buf.drain(..a.min(b));
        self.base += b;
        self.pos = 0;
        std::mem::replace(&mut self.buf, tail)
    }

    /// The next non-whitespace byte (not consumed).
    fn peek(&mut self) -> Res<Option<u8>> {
        loop {
            while let Some(&b) = self.buf.get(self.pos) {
                if matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                    self.pos += 1;
                } else {
                    return Ok(Some(b));
                }
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    fn expect(&mut self, c: u8) -> Res<()> {
        if self.peek()? == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            self.err("unexpected character")
        }
    }

    /// The extent of the next complete value (after whitespace), reading more as needed.
    fn value_span(&mut self) -> Res<(usize, usize)> {
        if self.peek()?.is_none() {
            return self.err("unexpected end");
        }
        loop {
            if let Some(end) = value_end(&self.buf[self.pos..], self.eof) {
                return Ok((self.pos, self.pos + end));
            }
            if !self.fill()? {
                return self.err("unexpected end");
            }
        }
    }

    /// Parses the next value with `f` (which gets it as a complete slice).
    fn with_value<T>(&mut self, f: impl FnOnce(JVal<'_>) -> T) -> Res<T> {
        let (a, b) = self.value_span()?;
        let Some(mut p) = Parser::new(&self.buf[a..b]) else {
            return self.err("not UTF-8");
        };
        let v = p.value()?;
        if !p.at_end() {
            return self.err("bad value");
        }
        let out = f(v);
        self.pos = b;
        Ok(out)
    }

    /// A key and its `:`.
    fn key(&mut self) -> Res<String> {
        if self.peek()? != Some(b'"') {
            return self.err("expected a key");
        }
        let k = self.with_value(|v| match v {
            JVal::Str(s) => Some(s.into_owned()),
            _ => None,
        })?;
        let Some(k) = k else {
            return self.err("expected a key");
        };
        self.expect(b':')?;
        Ok(k)
    }

    /// After `{` (`first`) or a member: `true` if another member follows.
    fn next_member(&mut self, first: bool) -> Res<bool> {
        match self.peek()? {
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
}

/// Length of the JSON value at the start of `s` (no leading whitespace), or `None` when `s`
/// ends before it does. Only the structure is followed (strings, escapes, nesting); the
/// parser checks the rest.
fn value_end(s: &[u8], eof: bool) -> Option<usize> {
    let first = *s.first()?;
    if first != b'{' && first != b'[' && first != b'"' {
        // A scalar: up to the next delimiter.
        let n = s
            .iter()
            .position(|&b| matches!(b, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'));
        return match n {
            Some(n) => Some(n),
            None if eof => Some(s.len()),
            None => None,
        };
    }
    let mut depth = 0usize;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'"' => {
                i += 1;
                loop {
                    let rel = memchr_quote_or_escape(s.get(i..)?)?;
                    i += rel;
                    if s[i] == b'\\' {
                        i += 2;
                    } else {
                        break;
                    }
                }
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// [`read_dump`] over any reader, holding about one chunk of the input at a time.
pub fn read_dump_from<R: std::io::Read>(
    src: R,
    visit: &mut dyn FnMut(&str, &JVal<'_>),
) -> Result<DumpHeader, FastError> {
    read_dump_batches(src, 0, &mut |batch| {
        for i in 0..batch.len() {
            visit(batch.name(i), &batch.parse(i)?);
        }
        Ok(())
    })
}

/// Entries of `data` copied out of the input as raw JSON, for parsing later (on any thread):
/// the scan that finds where each entry ends is sequential, parsing them need not be.
#[derive(Debug, Default)]
pub struct EntryBatch {
    arena: Vec<u8>,
    /// `(name, start, end, offset of the entry in the file)`.
    entries: Vec<(String, usize, usize, usize)>,
}

impl EntryBatch {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How far into the file the batch reaches: the offset just past its last entry (0 for an
    /// empty batch). Progress reports count bytes read with it.
    pub fn end_offset(&self) -> usize {
        self.entries
            .last()
            .map_or(0, |&(_, start, end, offset)| offset + (end - start))
    }

    /// The op name of entry `i`.
    pub fn name(&self, i: usize) -> &str {
        self.entries.get(i).map_or("", |e| e.0.as_str())
    }

    /// Where entry `i`'s raw JSON lies in the file: `(offset, length)` in bytes, so that a
    /// reader can keep the span instead of the entry and read it again later.
    pub fn span(&self, i: usize) -> Option<(usize, usize)> {
        self.entries
            .get(i)
            .map(|&(_, start, end, offset)| (offset, end - start))
    }

    /// Parses entry `i`; an entry that is not an object or `null` is an error.
    pub fn parse(&self, i: usize) -> Res<JVal<'_>> {
        let bad = |message| FastError {
            offset: self.entries.get(i).map_or(0, |e| e.3),
            message,
        };
        let (_, a, b, _) = self.entries.get(i).ok_or_else(|| bad("no such entry"))?;
        let mut p = Parser::new(self.arena.get(*a..*b).ok_or_else(|| bad("bad span"))?)
            .ok_or_else(|| bad("not UTF-8"))?;
        let v = p.value().map_err(|_| bad("bad value"))?;
        if !p.at_end() {
            return Err(bad("bad value"));
        }
        if !matches!(v, JVal::Obj(_) | JVal::Null) {
            return Err(bad("entry is not an object"));
        }
        Ok(v)
    }

    fn push(&mut self, name: String, raw: &[u8], offset: usize) {
        let start = self.arena.len();
        // Exactly: an entry longer than the batch is not given twice its size.
        self.arena.reserve_exact(raw.len());
        self.arena.extend_from_slice(raw);
        self.entries.push((name, start, self.arena.len(), offset));
    }

    /// Adds an entry that is all of `raw` (a long one, taken out of the reader's window):
    /// kept as it is when the batch is empty.
    fn push_owned(&mut self, name: String, raw: Vec<u8>, offset: usize) {
        if self.arena.is_empty() {
            let end = raw.len();
            self.arena = raw;
            self.entries.push((name, 0, end, offset));
        } else {
            self.push(name, &raw, offset);
        }
    }

    fn clear(&mut self) {
        // The room of a long entry is given back, not kept for the next batches.
        if self.arena.capacity() > 4 * CHUNK {
            self.arena = Vec::new();
        }
        self.arena.clear();
        self.entries.clear();
    }

    /// Takes the batch's entries, leaving it empty with room for `bytes` of JSON (for a caller
    /// that hands batches to another thread).
    pub fn take(&mut self, bytes: usize) -> EntryBatch {
        let fresh = EntryBatch {
            arena: Vec::with_capacity(bytes),
            entries: Vec::with_capacity(self.entries.len()),
        };
        std::mem::replace(self, fresh)
    }
}

/// Streams `dump.json` like [`read_dump_from`], handing `on_batch` the entries of `data` in
/// file order, in batches of about `batch_bytes` of JSON (`0`: one entry per batch). Only the
/// current chunk of input and one batch are in memory.
pub fn read_dump_batches<R: std::io::Read>(
    src: R,
    batch_bytes: usize,
    on_batch: &mut dyn FnMut(&mut EntryBatch) -> Res<()>,
) -> Result<DumpHeader, FastError> {
    let mut w = Window {
        src,
        buf: Vec::new(),
        pos: 0,
        eof: false,
        base: 0,
    };
    let mut h = DumpHeader::default();
    let mut has_data = false;
    let mut batch = EntryBatch::default();
    w.expect(b'{')?;
    let mut first = true;
    while w.next_member(first)? {
        first = false;
        let key = w.key()?;
        if key == "data" {
            has_data = true;
            if w.peek()? != Some(b'{') {
                return w.err("data is not an object");
            }
            w.expect(b'{')?;
            let mut first_entry = true;
            while w.next_member(first_entry)? {
                first_entry = false;
                let name = w.key()?;
                let (a, b) = w.value_span()?;
                if b - a >= CHUNK {
                    // A long entry goes in a batch of its own, moved out of the window.
                    if !batch.is_empty() {
                        on_batch(&mut batch)?;
                        batch.clear();
                    }
                    let offset = w.base + a;
                    batch.push_owned(name, w.take_span(a, b), offset);
                } else {
                    batch.push(name, &w.buf[a..b], w.base + a);
                    w.pos = b;
                }
                if batch.arena.len() >= batch_bytes {
                    on_batch(&mut batch)?;
                    batch.clear();
                }
            }
            if !batch.is_empty() {
                on_batch(&mut batch)?;
                batch.clear();
            }
        } else {
            let text = w.with_value(|v| v.as_str().map(str::to_string))?;
            match key.as_str() {
                "task" => h.task = text,
                "level" => h.level = text,
                "framework" => h.framework = text,
                "dump_data_dir" => h.dump_data_dir = text,
                _ => {}
            }
        }
    }
    if w.peek()?.is_some() {
        return w.err("trailing characters");
    }
    if !has_data {
        return w.err("no data");
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// How many fields [`KeyPositions::find`] compared keys with (a table lookup counts
        /// one): the many-keys test bounds it, not its time.
        pub(super) static KEYS_LOOKED_AT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    fn parse(s: &str) -> JVal<'_> {
        let mut p = Parser::new(s.as_bytes()).unwrap();
        let v = p.value().unwrap();
        assert!(p.at_end());
        v
    }

    /// Issue 14: an object of very many distinct keys parsed in quadratic time (each key was
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

    /// Regression (issue 14, defect 3): a value nested 10,000 deep overflowed the stack of the
    /// recursive parser and aborted the process.
    #[test]
    fn nesting_deeper_than_the_limit_is_an_error() {
        let nested = |depth: usize| {
            format!(
                "{{\"data\": {{\"op\": {{\"input_args\": {}1{}}}}}}}",
                "[".repeat(depth),
                "]".repeat(depth)
            )
        };
        let deep = nested(10_000);
        assert!(read_dump(deep.as_bytes(), &mut |_, _| {}).is_err());
        let entry = deep.find("{\"input_args").unwrap();
        let mut p = Parser::new(&deep.as_bytes()[entry..]).unwrap();
        assert_eq!(p.value().unwrap_err().message, "nested too deep");
        // Within the limit, nesting is read as before.
        let shallow = nested(MAX_DEPTH - 3);
        let mut depth = 0;
        read_dump(shallow.as_bytes(), &mut |_, v| {
            let mut v = v.get("input_args");
            while let Some(JVal::Arr(items)) = v {
                depth += 1;
                v = items.first();
            }
        })
        .unwrap();
        assert_eq!(depth, MAX_DEPTH - 3);
    }

    /// Regression (issue 14, defect 4): a long array is kept as its text and walked one element
    /// at a time, with the same values as a tree; a bad element deep in it is still an error.
    #[test]
    fn long_arrays_are_kept_as_text_with_the_same_values() {
        let items: Vec<String> = (0..40_000)
            .map(|i| match i % 4 {
                0 => i.to_string(),
                1 => format!("\"s\\u00e9{i}\""),
                2 => format!("[{i}, {{\"k\": -Infinity}}]"),
                _ => "-1.5e-7".into(),
            })
            .collect();
        let text = format!("[{}]", items.join(", "));
        assert!(text.len() > LAZY_ARRAY_BYTES);
        let lazy = parse(&text);
        assert!(matches!(lazy, JVal::LazyArr(_)), "kept as text");
        assert_eq!(lazy.array_len(), items.len());
        let serde = crate::json::parse_python_json(text.as_bytes()).unwrap();
        assert_eq!(lazy, JVal::from_value(&serde));
        assert_eq!(lazy.to_value(), serde);
        let mut bad = text.clone();
        bad.insert_str(text.len() - 10, "[1,]");
        let mut p = Parser::new(bad.as_bytes()).unwrap();
        assert!(p.value().is_err() || !p.at_end());
        // As a dump.json entry read through a window a few bytes at a time.
        let dump = format!("{{\"data\": {{\"a\": {{\"input_args\": {text}}}, \"b\": {{}}}}}}");
        let mut names = Vec::new();
        read_dump(dump.as_bytes(), &mut |k, v| {
            names.push(k.to_string());
            if k == "a" {
                assert_eq!(v.get("input_args").map(JVal::array_len), Some(items.len()));
            }
        })
        .unwrap();
        assert_eq!(names, ["a", "b"]);
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
        assert!(read_dump(br#"{"data": {"a": {}}} x"#, &mut |_, _| {}).is_err());
        assert!(read_dump(br#"{"data": {"a": {"b": [1, 2}}}"#, &mut |_, _| {}).is_err());
        // A reader that hands out a few bytes at a time: entries span many reads.
        struct Trickle<'a>(&'a [u8]);
        impl std::io::Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = buf.len().min(self.0.len()).min(3);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut seen = Vec::new();
        let h = read_dump_from(Trickle(text), &mut |k, v| {
            seen.push((k.to_string(), format!("{v:?}")))
        })
        .unwrap();
        let mut direct = Vec::new();
        read_dump(text, &mut |k, v| {
            direct.push((k.to_string(), format!("{v:?}")))
        })
        .unwrap();
        assert_eq!(seen, direct);
        assert_eq!(h.framework.as_deref(), Some("mindspore"));
    }
}
