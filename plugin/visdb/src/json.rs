//! JSON as msprobe writes it into `.vis.db` columns.
//!
//! Python's `json.dumps` writes bare `NaN`, `Infinity` and `-Infinity` tokens, which strict JSON
//! parsers refuse. [`parse_lenient`] reads them (as the strings `"NaN"`, `"Infinity"`,
//! `"-Infinity"`, the same text TensorBoard's JSON cleanser sends to browsers), so a column with
//! such a token never makes a node unreadable. The scanner is the dump reader's
//! ([`graph_ascend_dump::json::quote_non_finite`]), one for both.

use graph_ascend_dump::json::{quote_non_finite, NonFinite};
use serde_json::Value;

/// Parses a JSON column. Empty text is `None`; bare NaN/Infinity tokens become strings.
pub fn parse_lenient(text: &str) -> Result<Option<Value>, serde_json::Error> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    match serde_json::from_str(trimmed) {
        Ok(v) => Ok(Some(v)),
        Err(first) => match quote_non_finite(trimmed.as_bytes(), NonFinite::Text) {
            Some(quoted) => serde_json::from_slice(&quoted).map(Some),
            None => Err(first),
        },
    }
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
