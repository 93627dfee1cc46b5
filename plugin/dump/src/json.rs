//! JSON as Python's `json` module writes it.
//!
//! msprobe dumps contain bare `NaN`, `Infinity` and `-Infinity` tokens (overflowing statistics),
//! which strict JSON parsers refuse. Before parsing, such tokens outside strings are replaced by
//! marker strings that cannot occur in real data; [`non_finite_marker`] turns them back into
//! floats when values are converted to [`crate::PyVal`]. The same scanner reads `.vis.db`
//! columns (`graph_ascend_visdb::json`), where the tokens become their own text.

use std::path::Path;

use serde_json::Value;

use crate::confine::Confine;
use crate::error::DumpError;

const MARK: char = '\u{1}';

/// Reads and parses a JSON file, accepting Python's non-finite float tokens.
pub fn read_json_file(path: &Path, confine: &Confine) -> Result<Value, DumpError> {
    let bytes = confine.read(path)?;
    parse_python_json(&bytes).map_err(|source| DumpError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// Streams the members of a JSON file's top-level object, in file order, each value parsed
/// alone (Python's non-finite tokens turned into markers, as [`read_json_file`] does), so that
/// neither the file nor a parsed tree of it is ever held. `visit(key, value)` answers whether to
/// go on. `Ok(true)`: every member was visited; `Ok(false)`: the file is not one well-formed
/// JSON object, or `visit` stopped: the caller then reads the file with [`read_json_file`],
/// which words the problem (so a bad file gets the same error either way).
pub fn stream_object(
    path: &Path,
    confine: &crate::confine::Confine,
    visit: &mut dyn FnMut(String, Value) -> bool,
) -> Result<bool, DumpError> {
    let file = confine.open(path)?;
    let reader = PythonJsonReader::buffered(file);
    let mut de = serde_json::Deserializer::from_reader(reader);
    let members = Members {
        expecting: "a JSON object",
        visit: &mut |key, value| Ok(visit(key, value)),
    };
    let done = serde::de::DeserializeSeed::deserialize(members, &mut de)
        .and_then(|done| de.end().map(|()| done));
    Ok(done.unwrap_or(false))
}

/// A JSON object read member by member, each value parsed alone, in file order: the one
/// streaming visitor of the dump readers ([`stream_object`] for construct.json and stack.json,
/// [`crate::DumpFile::read_streaming`] for dump.json's `data`). `visit(key, value)` answers
/// `Ok(true)` to go on, `Ok(false)` to stop (the object then reads as `false`), or an error
/// message that ends the parse.
pub(crate) struct Members<'a> {
    /// What the value must be, for the error when it is not an object.
    pub expecting: &'static str,
    pub visit: &'a mut dyn FnMut(String, Value) -> Result<bool, String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Members<'_> {
    /// Every member was visited.
    type Value = bool;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Members<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.expecting)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            let value: Value = map.next_value()?;
            match (self.visit)(key, value) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(message) => return Err(serde::de::Error::custom(message)),
            }
        }
        Ok(true)
    }
}

/// Keys seen so far in a streamed object, by hash: a repeated key (whose last value wins, at its
/// first place, in Python and in [`read_json_file`]) sends the caller back to the whole-file
/// reader. A hash collision does too, which is only slower.
#[derive(Default)]
pub struct SeenKeys(std::collections::HashSet<u64, foldhash::fast::FixedState>);

impl SeenKeys {
    /// `false` when `key` (or its hash) was seen before.
    pub fn first_time(&mut self, key: &str) -> bool {
        use std::hash::BuildHasher;
        let h = foldhash::fast::FixedState::with_seed(0x5eed).hash_one(key);
        self.0.insert(h)
    }
}

/// Reads a file's bytes with Python's non-finite tokens already turned into markers.
pub fn read_python_json_bytes(path: &Path, confine: &Confine) -> Result<Vec<u8>, DumpError> {
    let bytes = confine.read(path)?;
    Ok(quote_non_finite(&bytes, NonFinite::Marker).unwrap_or(bytes))
}

/// A file's bytes as a reader, with Python's non-finite tokens turned into markers on the way
/// (as [`quote_non_finite`] with [`NonFinite::Marker`] does to a whole buffer): a streaming
/// parser over it holds one value at a time, never the file nor a rewritten copy of it.
pub struct PythonJsonReader<R> {
    src: R,
    /// Rewritten bytes; those before `handed` are handed out.
    out: Vec<u8>,
    handed: usize,
    in_string: bool,
    escaped: bool,
    /// A `-` outside a string, held until the next byte says whether `-Infinity` starts.
    minus: bool,
    /// The rest of the non-finite token being copied (its closing quote comes after it).
    token_rest: &'static [u8],
    done: bool,
    /// For [`value_may_start`]: the last byte outside strings, and the open containers.
    last: u8,
    containers: Vec<bool>,
}

impl PythonJsonReader<std::io::BufReader<std::fs::File>> {
    /// A file's text rewritten, behind a buffer on both sides: `serde_json`'s reader asks for
    /// one byte at a time, and the rewrite is cheap only over a block.
    pub fn buffered(file: std::fs::File) -> std::io::BufReader<Self> {
        std::io::BufReader::with_capacity(
            1 << 16,
            PythonJsonReader::new(std::io::BufReader::with_capacity(1 << 16, file)),
        )
    }
}

impl<R: std::io::BufRead> PythonJsonReader<R> {
    pub fn new(src: R) -> Self {
        PythonJsonReader {
            src,
            out: Vec::new(),
            handed: 0,
            in_string: false,
            escaped: false,
            minus: false,
            token_rest: b"",
            done: false,
            last: 0,
            containers: Vec::new(),
        }
    }

    fn open_token(&mut self, first: &[u8], rest: &'static [u8]) {
        self.last = b'"';
        self.out.extend_from_slice(b"\"\\u0001");
        self.out.extend_from_slice(first);
        self.token_rest = rest;
    }

    /// Rewrites one input byte into `out`.
    fn push(&mut self, c: u8) {
        if let Some((&want, rest)) = self.token_rest.split_first() {
            if c == want {
                self.out.push(c);
                self.token_rest = rest;
                if rest.is_empty() {
                    self.out.push(b'"');
                }
            } else {
                // Not the token after all: a control byte inside the opened string makes the
                // text invalid, as the original was.
                self.token_rest = b"";
                self.out.extend_from_slice(&[0x01, c]);
            }
            return;
        }
        if self.minus {
            self.minus = false;
            if c == b'I' {
                self.open_token(b"-I", b"nfinity");
                return;
            }
            self.out.push(b'-');
            self.last = b'-';
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if c == b'\\' {
                self.escaped = true;
            } else if c == b'"' {
                self.in_string = false;
                self.last = b'"';
            }
            self.out.push(c);
            return;
        }
        let value_here = value_may_start(self.last, self.containers.last() == Some(&true));
        match c {
            b'"' => {
                self.in_string = true;
                self.out.push(c);
            }
            b'-' if value_here => self.minus = true,
            b'N' if value_here => self.open_token(b"N", b"aN"),
            b'I' if value_here => self.open_token(b"I", b"nfinity"),
            _ => {
                track(c, &mut self.last, &mut self.containers);
                self.out.push(c);
            }
        }
    }
}

impl<R: std::io::BufRead> PythonJsonReader<R> {
    /// Rewrites a block of input: the text inside strings, most of a dump's bytes, is copied
    /// a run at a time up to the next quote or backslash; the rest byte by byte.
    fn push_block(&mut self, bytes: &[u8]) {
        let mut i = 0;
        while i < bytes.len() {
            if self.in_string && !self.escaped && self.token_rest.is_empty() && !self.minus {
                let run = memchr::memchr2(b'"', b'\\', &bytes[i..]).unwrap_or(bytes.len() - i);
                self.out.extend_from_slice(&bytes[i..i + run]);
                i += run;
                if i == bytes.len() {
                    break;
                }
            }
            self.push(bytes[i]);
            i += 1;
        }
    }
}

impl<R: std::io::BufRead> std::io::Read for PythonJsonReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.handed == self.out.len() {
            self.out.clear();
            self.handed = 0;
        }
        while self.out.len() - self.handed < buf.len() && !self.done {
            let chunk = self.src.fill_buf()?;
            if chunk.is_empty() {
                self.done = true;
                if self.minus {
                    self.minus = false;
                    self.out.push(b'-');
                }
                break;
            }
            let bytes = chunk.to_vec();
            self.src.consume(bytes.len());
            self.push_block(&bytes);
        }
        let n = (self.out.len() - self.handed).min(buf.len());
        buf[..n].copy_from_slice(&self.out[self.handed..self.handed + n]);
        self.handed += n;
        Ok(n)
    }
}

/// Parses JSON text that may contain bare `NaN` / `Infinity` / `-Infinity`.
pub fn parse_python_json(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    match serde_json::from_slice(bytes) {
        Ok(v) => Ok(v),
        Err(first) => {
            let Some(quoted) = quote_non_finite(bytes, NonFinite::Marker) else {
                return Err(first);
            };
            serde_json::from_slice(&quoted)
        }
    }
}

/// If `s` is a marker written by [`quote_non_finite`], the float it stands for.
pub fn non_finite_marker(s: &str) -> Option<f64> {
    let rest = s.strip_prefix(MARK)?;
    match rest {
        "NaN" => Some(f64::NAN),
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// The marker string [`non_finite_marker`] reads back as `f` (NaN or an infinity).
pub fn marker_of(f: f64) -> String {
    let token = if f.is_nan() {
        "NaN"
    } else if f > 0.0 {
        "Infinity"
    } else {
        "-Infinity"
    };
    format!("{MARK}{token}")
}

/// What [`quote_non_finite`] makes of a bare `NaN`, `Infinity` or `-Infinity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonFinite {
    /// A marker string that cannot occur in real data, read back as the float by
    /// [`non_finite_marker`] (dump files: the value stays a number).
    Marker,
    /// The string of the token's own text, `"NaN"` (`.vis.db` columns: the text TensorBoard's
    /// JSON cleanser sends to browsers).
    Text,
}

/// Where a value may start: after `:`, after `[`, after `,` inside an array, or at the top
/// (`last` is the last byte outside strings and whitespace, 0 at the start; `in_array` whether
/// the innermost open container is an array). A bare `NaN` anywhere else (an object key, say)
/// is left alone, so that the parser refuses it as Python's `json` does.
fn value_may_start(last: u8, in_array: bool) -> bool {
    matches!(last, 0 | b':' | b'[') || (last == b',' && in_array)
}

/// Follows the structure for [`value_may_start`]: `containers` holds `true` per open array.
fn track(c: u8, last: &mut u8, containers: &mut Vec<bool>) {
    match c {
        b' ' | b'\n' | b'\r' | b'\t' => return,
        b'[' => containers.push(true),
        b'{' => containers.push(false),
        b']' | b'}' => {
            containers.pop();
        }
        _ => {}
    }
    *last = c;
}

/// Rewrites bare non-finite tokens outside strings as JSON strings; `None` when there is none.
pub fn quote_non_finite(text: &[u8], quote_as: NonFinite) -> Option<Vec<u8>> {
    let prefix: &[u8] = match quote_as {
        NonFinite::Marker => b"\\u0001",
        NonFinite::Text => b"",
    };
    let mut out = Vec::with_capacity(text.len() + 64);
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    let mut changed = false;
    let mut last = 0u8;
    let mut containers: Vec<bool> = Vec::new();
    while i < text.len() {
        let c = text[i];
        if in_string {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
                last = b'"';
            }
        } else if c == b'"' {
            in_string = true;
        } else if let Some(token) = [&b"-Infinity"[..], b"Infinity", b"NaN"]
            .into_iter()
            .filter(|_| value_may_start(last, containers.last() == Some(&true)))
            .find(|t| text[i..].starts_with(t))
        {
            out.push(b'"');
            out.extend_from_slice(prefix);
            out.extend_from_slice(token);
            out.push(b'"');
            i += token.len();
            changed = true;
            last = b'"';
            continue;
        } else {
            track(c, &mut last, &mut containers);
        }
        out.push(c);
        i += 1;
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_tokens_round_trip() {
        let v =
            parse_python_json(br#"{"a": NaN, "b": [Infinity, -Infinity], "c": "NaN"}"#).unwrap();
        assert!(non_finite_marker(v["a"].as_str().unwrap())
            .unwrap()
            .is_nan());
        assert_eq!(
            non_finite_marker(v["b"][0].as_str().unwrap()),
            Some(f64::INFINITY)
        );
        assert_eq!(
            non_finite_marker(v["b"][1].as_str().unwrap()),
            Some(f64::NEG_INFINITY)
        );
        assert_eq!(non_finite_marker(v["c"].as_str().unwrap()), None);
    }

    /// The streaming rewrite gives the same bytes as the whole-buffer one, however the input
    /// is cut into reads.
    #[test]
    fn streaming_rewrite_equals_the_buffer_rewrite() {
        let cases: [&[u8]; 9] = [
            b"{\"a\": 1, NaN: 3}",
            b"[1, {\"k\": [NaN, -Infinity]}, Infinity]",
            br#"{"a": NaN, "b": [Infinity, -Infinity, -1.5], "c": "NaN \" -Infinity"}"#,
            br#"[-Infinity]"#,
            br#"-"#,
            br#"[Nope]"#,
            br#"{"x": "\\", "y": NaN}"#,
            br#"[1, -2, "-I"]"#,
            br#"{"long \" text \\": ["a string \\\" longer than a read", NaN], "Inf": -Infinity}"#,
        ];
        for text in cases {
            let whole = quote_non_finite(text, NonFinite::Marker).unwrap_or(text.to_vec());
            for cap in [1, 2, 3, 64] {
                let src = std::io::BufReader::with_capacity(cap, text);
                let mut streamed = Vec::new();
                std::io::Read::read_to_end(&mut PythonJsonReader::new(src), &mut streamed).unwrap();
                if text == br#"[Nope]"# {
                    assert!(serde_json::from_slice::<Value>(&streamed).is_err());
                } else {
                    assert_eq!(
                        String::from_utf8_lossy(&streamed),
                        String::from_utf8_lossy(&whole),
                        "{cap}"
                    );
                }
                // Read a byte at a time, as `serde_json`'s reader does.
                let src = std::io::BufReader::with_capacity(cap, text);
                let one_by_one: Vec<u8> = std::io::Read::bytes(PythonJsonReader::new(src))
                    .collect::<Result<_, _>>()
                    .unwrap();
                assert_eq!(one_by_one, streamed, "{cap}");
            }
        }
    }

    /// Regression (fuzz target `fastjson_vs_serde`): a bare `NaN` as an object key was quoted
    /// into a key and accepted, where the fast reader and Python refuse it.
    #[test]
    fn a_bare_token_is_only_a_value() {
        assert!(parse_python_json(b"{\"a\": 1, \n\n\n\n\nNaN\n:3}").is_err());
        assert!(parse_python_json(b"{NaN: 1}").is_err());
        assert!(parse_python_json(b"[NaN, {\"x\": -Infinity}, [Infinity]]").is_ok());
    }

    #[test]
    fn truncated_is_an_error() {
        assert!(parse_python_json(br#"{"a": [1, 2"#).is_err());
    }
}
