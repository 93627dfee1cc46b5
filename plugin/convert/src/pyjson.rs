//! `json.dumps` as Python writes it: `", "` / `": "` separators and `ensure_ascii` escapes.
//!
//! The `.vis.db` text columns are Python `json.dumps` output; writing them the same way keeps
//! our files byte-comparable with msprobe's and readable by its plugin.

use std::fmt::Write;

/// Appends `s` as a JSON string literal with Python's `ensure_ascii=True` escaping.
pub fn push_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
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
        let v = serde_json::json!({"a": [0, 0.3], "b": "比"});
        assert_eq!(value(&v), r#"{"a": [0, 0.3], "b": "\u6bd4"}"#);
    }
}
