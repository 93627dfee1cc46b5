//! `json.dumps` as Python writes it: `", "` / `": "` separators and `ensure_ascii` escapes.
//!
//! The `.vis.db` text columns are Python `json.dumps` output; writing them the same way keeps
//! our files byte-comparable with msprobe's and readable by its plugin.

use std::fmt::Write;

/// Appends `s` as a JSON string literal with Python's `ensure_ascii=True` escaping.
pub fn push_str(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    push_escaped(out, s);
    out.push('"');
}

/// A writer appending what it is given to a string, escaped as inside a JSON string literal
/// ([`push_str`] without the quotes): text written piece by piece lands escaped in place.
pub struct Escaped<'o>(pub &'o mut String);

impl std::fmt::Write for Escaped<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        push_escaped(self.0, s);
        Ok(())
    }
}

/// Length of `s` as [`push_str`] writes it, quotes excluded ([`Escaped`] of `s`).
pub fn escaped_len(s: &str) -> usize {
    let clean = clean_prefix_len(s.as_bytes());
    clean
        + s[clean..]
            .chars()
            .map(|c| match c {
                '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
                ' '..='~' => 1,
                c => 6 * c.len_utf16(),
            })
            .sum::<usize>()
}

/// The body of [`push_str`]: `s` escaped, no quotes.
fn push_escaped(out: &mut String, s: &str) {
    let bytes = s.as_bytes();
    let clean = clean_prefix_len(bytes);
    if clean == bytes.len() {
        out.push_str(s);
        return;
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate().skip(clean) {
        // Printable ASCII other than `"` and `\` is copied as a run.
        if (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\' {
            continue;
        }
        if b >= 0x80 && !s.is_char_boundary(i) {
            continue;
        }
        out.push_str(&s[start..i]);
        let c = s[i..].chars().next().unwrap_or('\u{fffd}');
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
        start = i + c.len_utf8();
    }
    out.push_str(&s[start..]);
}

/// Length of the leading run of bytes that need no escaping (printable ASCII other than `"` and
/// `\\`), eight bytes at a time: most text in a dump is plain ASCII.
fn clean_prefix_len(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // A high bit set in the result for each zero byte of `v` (exact for the first zero byte).
    let zero_bytes = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let mut i = 0;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let special = x & HIGHS // non-ASCII
            | x.wrapping_sub(ONES * 0x20) & !x & HIGHS // control characters
            | zero_bytes(x ^ (ONES * 0x7f))
            | zero_bytes(x ^ (ONES * u64::from(b'"')))
            | zero_bytes(x ^ (ONES * u64::from(b'\\')));
        if special != 0 {
            break;
        }
        i += 8;
    }
    while let Some(&b) = bytes.get(i) {
        if !(0x20..=0x7e).contains(&b) || b == b'"' || b == b'\\' {
            break;
        }
        i += 1;
    }
    i
}

/// `json.dumps(list_of_strings)`.
pub fn str_list<S: AsRef<str>>(items: &[S]) -> String {
    let mut out = String::from("[");
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_str(&mut out, s.as_ref());
    }
    out.push(']');
    out
}

/// `json.dumps` of a `serde_json::Value` (object keys in their stored order).
pub fn value(v: &serde_json::Value) -> String {
    let mut out = String::new();
    push_value(&mut out, v);
    out
}

fn push_value(out: &mut String, v: &serde_json::Value) {
    use serde_json::Value as V;
    match v {
        V::Null => out.push_str("null"),
        V::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        V::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
                out.push_str(&graph_ascend_dump::pyval::float_repr(f));
            } else {
                out.push_str(&n.to_string());
            }
        }
        V::String(s) => push_str(out, s),
        V::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_value(out, x);
            }
            out.push(']');
        }
        V::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_str(out, k);
                out.push_str(": ");
                push_value(out, x);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_python() {
        assert_eq!(
            str_list(&["a\"b", "\n", "é"]),
            r#"["a\"b", "\n", "\u00e9"]"#
        );
        assert_eq!(str_list::<&str>(&[]), "[]");
        // Like Python: anything outside space..`~` is escaped (DEL too), non-BMP as UTF-16 pairs.
        assert_eq!(
            str_list(&["a\u{7f}b\u{1}c\\", "x😀y"]),
            "[\"a\\u007fb\\u0001c\\\\\", \"x\\ud83d\\ude00y\"]"
        );
        let v = serde_json::json!({"a": [0, 0.3], "b": "比"});
        assert_eq!(value(&v), r#"{"a": [0, 0.3], "b": "\u6bd4"}"#);
    }

    /// Every ASCII character at every position of a 20-byte run, against a char-by-char escape.
    #[test]
    fn word_scan_finds_every_special_byte() {
        let reference = |s: &str| {
            let mut out = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    '\u{8}' => out.push_str("\\b"),
                    '\u{c}' => out.push_str("\\f"),
                    ' '..='~' => out.push(c),
                    c => {
                        let mut buf = [0u16; 2];
                        for unit in c.encode_utf16(&mut buf) {
                            out.push_str(&format!("\\u{unit:04x}"));
                        }
                    }
                }
            }
            out.push('"');
            out
        };
        for c in (0u8..128).map(char::from).chain(['é', '比', '😀']) {
            for pos in 0..20 {
                let mut s: String = "abcdefghijklmnopqrst".chars().take(pos).collect();
                s.push(c);
                s.push_str(&"xyz".repeat(pos % 4));
                let mut ours = String::new();
                push_str(&mut ours, &s);
                assert_eq!(ours, reference(&s), "{s:?}");
            }
        }
    }
}
