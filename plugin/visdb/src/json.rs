//! JSON as msprobe writes it into `.vis.db` columns.
//!
//! Python's `json.dumps` writes bare `NaN`, `Infinity` and `-Infinity` tokens, which strict JSON
//! parsers refuse. [`parse_lenient`] reads them (as the strings `"NaN"`, `"Infinity"`,
//! `"-Infinity"`, the same text TensorBoard's JSON cleanser sends to browsers), so a column with
//! such a token never makes a node unreadable.

use serde_json::Value;

/// Parses a JSON column. Empty text is `None`; bare NaN/Infinity tokens become strings.
pub fn parse_lenient(text: &str) -> Result<Option<Value>, serde_json::Error> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    match serde_json::from_str(trimmed) {
        Ok(v) => Ok(Some(v)),
        Err(first) => {
            let quoted = quote_bare_non_finite(trimmed);
            if quoted.len() == trimmed.len() {
                return Err(first);
            }
            serde_json::from_str(&quoted).map(Some)
        }
    }
}

/// Rewrites bare `NaN`, `Infinity` and `-Infinity` outside strings as JSON strings.
fn quote_bare_non_finite(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        } else if let Some(token) = ["-Infinity", "Infinity", "NaN"]
            .into_iter()
            .find(|t| rest.starts_with(t))
        {
            out.push('"');
            out.push_str(token);
            out.push('"');
            rest = &rest[token.len()..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strict_json_passes_through() {
        assert_eq!(parse_lenient("[1, \"a\"]").unwrap(), Some(json!([1, "a"])));
    }

    #[test]
    fn empty_is_none() {
        assert_eq!(parse_lenient("  ").unwrap(), None);
    }

    #[test]
    fn bare_non_finite_tokens_become_strings() {
        let v = parse_lenient(r#"{"a": NaN, "b": [Infinity, -Infinity], "c": "NaN inside"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            v,
            json!({"a": "NaN", "b": ["Infinity", "-Infinity"], "c": "NaN inside"})
        );
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(parse_lenient("{not json").is_err());
    }
}
