//! `dump.json` streamed: a window on the file that holds about one chunk at a time, the walk of
//! the top-level object and its `data`, and the entries cut out as raw JSON ([`EntryBatch`])
//! for [`Parser`] to parse later, on any thread.

use super::parse::{memchr_quote_or_escape, FastError, JVal, Parser, Res};

/// The header of a `dump.json` read by [`read_dump`].
#[derive(Debug, Default)]
pub struct DumpHeader {
    pub task: Option<String>,
    pub level: Option<String>,
    pub framework: Option<String>,
    pub dump_data_dir: Option<String>,
    /// Whether the top-level object has a `data` key (a dump without one reads as empty).
    pub has_data: bool,
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
    h.has_data = has_data;
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fastjson::parse::tests::parse;
    use crate::fastjson::parse::{LAZY_ARRAY_BYTES, MAX_DEPTH};

    /// Regression: a value nested 10,000 deep overflowed the stack of the
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

    /// Regression: a long array is kept as its text and walked one element
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
        assert!(h.has_data);
        // No `data` key: read as empty (msprobe's graph builder), the header says so.
        let h = read_dump(br#"{"task": "x"}"#, &mut |_, _| panic!("no entry")).unwrap();
        assert!(!h.has_data);
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
