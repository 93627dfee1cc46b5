//! JSON as Python's `json` module writes it.
//!
//! msprobe dumps contain bare `NaN`, `Infinity` and `-Infinity` tokens (overflowing statistics),
//! which strict JSON parsers refuse. Before parsing, such tokens outside strings are replaced by
//! marker strings that cannot occur in real data; [`non_finite_marker`] turns them back into
//! floats when values are converted to [`crate::PyVal`]. The same scanner reads `.vis.db`
//! columns (`graph_ascend_visdb::json`), where the tokens become their own text.

use std::path::Path;

use serde_json::Value;

use crate::DumpError;

const MARK: char = '\u{1}';

/// Reads and parses a JSON file, accepting Python's non-finite float tokens.
pub fn read_json_file(path: &Path) -> Result<Value, DumpError> {
    let bytes = std::fs::read(path).map_err(|source| DumpError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_python_json(&bytes).map_err(|source| DumpError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a file's bytes with Python's non-finite tokens already turned into markers.
pub fn read_python_json_bytes(path: &Path) -> Result<Vec<u8>, DumpError> {
    let bytes = std::fs::read(path).map_err(|source| DumpError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(quote_non_finite(&bytes, NonFinite::Marker).unwrap_or(bytes))
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
    while i < text.len() {
        let c = text[i];
        if in_string {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
        } else if c == b'"' {
            in_string = true;
        } else if let Some(token) = [&b"-Infinity"[..], b"Infinity", b"NaN"]
            .into_iter()
            .find(|t| text[i..].starts_with(t))
        {
            out.push(b'"');
            out.extend_from_slice(prefix);
            out.extend_from_slice(token);
            out.push(b'"');
            i += token.len();
            changed = true;
            continue;
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

    #[test]
    fn truncated_is_an_error() {
        assert!(parse_python_json(br#"{"a": [1, 2"#).is_err());
    }
}
