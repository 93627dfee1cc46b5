//! SQLite values and JSON columns as the rows hold them: text (NULL empty, numbers printed),
//! numbers, and the JSON lists of names, owned or borrowed from the row. Errors are reasons
//! ([`ListError`]); the store names the file, the node and the column around them.

use std::borrow::Cow;

use rusqlite::types::{Value as SqlValue, ValueRef};
use serde_json::Value;

use crate::json::parse_lenient;

/// SQLite value as text (numbers printed, NULL empty).
pub(super) fn text(v: SqlValue) -> String {
    match v {
        SqlValue::Null => String::new(),
        SqlValue::Integer(i) => i.to_string(),
        SqlValue::Real(f) => f.to_string(),
        SqlValue::Text(t) => t,
        SqlValue::Blob(b) => String::from_utf8_lossy(&b).into_owned(),
    }
}

pub(super) fn integer(v: SqlValue) -> Option<i64> {
    match v {
        SqlValue::Integer(i) => Some(i),
        SqlValue::Real(f) => Some(f as i64),
        SqlValue::Text(t) => t.trim().parse().ok(),
        _ => None,
    }
}

/// A numeric column; NULL, empty text and non-numbers are `None`.
pub(super) fn number(v: SqlValue) -> Option<f64> {
    match v {
        SqlValue::Integer(i) => Some(i as f64),
        SqlValue::Real(f) => Some(f),
        SqlValue::Text(t) => t.trim().parse().ok(),
        _ => None,
    }
}

/// A borrowed SQLite value as text, as [`text`] prints it: borrowed when it is (valid UTF-8)
/// text, printed otherwise.
pub(super) fn text_ref(v: ValueRef<'_>) -> Cow<'_, str> {
    match v {
        ValueRef::Null => Cow::Borrowed(""),
        ValueRef::Integer(i) => Cow::Owned(i.to_string()),
        ValueRef::Real(f) => Cow::Owned(f.to_string()),
        // Checked with `from_utf8` first: its ASCII fast path is several times quicker than the
        // lossy decoder, which showed as a tenth of an index build; the lossy one only for bad text.
        ValueRef::Text(t) | ValueRef::Blob(t) => match std::str::from_utf8(t) {
            Ok(text) => Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(t),
        },
    }
}

/// [`integer`] of a borrowed value.
pub(super) fn integer_ref(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => Some(i),
        ValueRef::Real(f) => Some(f as i64),
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// [`number`] of a borrowed value.
pub(super) fn number_ref(v: ValueRef<'_>) -> Option<f64> {
    match v {
        ValueRef::Integer(i) => Some(i as f64),
        ValueRef::Real(f) => Some(f),
        ValueRef::Text(t) => std::str::from_utf8(t).ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// A JSON column that holds an object when it holds anything (`matched_distributed`,
/// `output_data`): empty text reads as an empty object, read without the parser; other values
/// come back as they are.
pub(super) fn value_or_empty_object(text: &str) -> Result<Value, serde_json::Error> {
    match text.trim() {
        "" | "{}" => Ok(Value::Object(Default::default())),
        text => Ok(parse_lenient(text)?.unwrap_or_else(|| Value::Object(Default::default()))),
    }
}

/// One string of a JSON list, borrowed from the text when it has no escapes.
#[derive(serde::Deserialize)]
struct ListItem<'a>(#[serde(borrow)] Cow<'a, str>);

/// The last string of a JSON list of strings, the others read and dropped as they come.
struct LastItem<'a>(Option<Cow<'a, str>>);

impl<'de> serde::Deserialize<'de> for LastItem<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Items;
        impl<'de> serde::de::Visitor<'de> for Items {
            type Value = LastItem<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of strings")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<LastItem<'de>, A::Error> {
                let mut last = None;
                while let Some(ListItem(item)) = seq.next_element()? {
                    last = Some(item);
                }
                Ok(LastItem(last))
            }
        }
        d.deserialize_seq(Items)
    }
}

/// The last element of a JSON list of strings ([`string_list`]'s reading, same errors), without
/// building the list: a strict list of strings is read borrowing from `text`; anything else
/// (bare `NaN`, `null`, a wrong type) goes through [`string_list`].
pub(super) fn last_string(text: &str) -> Result<Option<Cow<'_, str>>, ListError> {
    match serde_json::from_str::<LastItem<'_>>(text.trim()) {
        Ok(LastItem(last)) => Ok(last),
        Err(_) => Ok(string_list(text)?.pop().map(Cow::Owned)),
    }
}

pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Why a column that holds a JSON list of names does not (the `reason` of a
/// [`StoreError::Data`] naming the column and the node).
#[derive(Debug, thiserror::Error)]
pub(super) enum ListError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("expected strings, found {0}")]
    NotStrings(&'static str),
    #[error("expected a list, found {0}")]
    NotAList(&'static str),
}

impl From<ListError> for String {
    fn from(e: ListError) -> String {
        e.to_string()
    }
}

/// A JSON list of strings; empty text or `null` is an empty list.
pub(super) fn string_list(text: &str) -> Result<Vec<String>, ListError> {
    match parse_lenient(text)? {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                other => Err(ListError::NotStrings(kind(&other))),
            })
            .collect(),
        Some(other) => Err(ListError::NotAList(kind(&other))),
    }
}

/// Like [`string_list`] but any item is printed as text, and a bare string is one item
/// (stack and merge info come in several shapes across msprobe versions).
pub(super) fn loose_string_list(text: &str) -> Result<Vec<String>, ListError> {
    match parse_lenient(text)? {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => s,
                other => other.to_string(),
            })
            .collect()),
        Some(Value::String(s)) => Ok(vec![s]),
        Some(other) => Ok(vec![other.to_string()]),
    }
}

/// A JSON list of strings, borrowed from `text` when no item needs unescaping; otherwise (and
/// for anything but plain JSON) read as [`string_list`] reads it.
pub(super) fn string_list_ref(text: &str) -> Result<Vec<Cow<'_, str>>, String> {
    if let Ok(items) = serde_json::from_str::<Vec<&str>>(text) {
        return Ok(items.into_iter().map(Cow::Borrowed).collect());
    }
    Ok(string_list(text)?.into_iter().map(Cow::Owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index pass reads the partner without building the list: it must read every shape
    /// exactly as `string_list` does (escapes, bare NaN, `null`) and fail where it fails.
    #[test]
    fn the_last_string_of_a_list_reads_as_string_list_does() {
        for text in [
            r#"["up", "name"]"#,
            r#" ["a\"b", "c\u00e9\n"] "#,
            "[]",
            "null",
            r#"["x"]"#,
            "[NaN]",
            r#"["a", 1]"#,
            r#"{"a": "b"}"#,
            "not json",
        ] {
            let expected = string_list(text)
                .map(|mut l| l.pop())
                .map_err(|e| e.to_string());
            let got = last_string(text)
                .map(|l| l.map(Cow::into_owned))
                .map_err(|e| e.to_string());
            assert_eq!(got, expected, "{text}");
        }
        assert!(string_list(r#"["a", 1]"#).is_err());
        assert!(matches!(
            last_string(r#"["up", "name"]"#),
            Ok(Some(Cow::Borrowed("name")))
        ));
    }

    #[test]
    fn lists_are_borrowed_unless_escaped_and_read_leniently_otherwise() {
        let plain = string_list_ref(r#"["a", "b"]"#).expect("a list");
        assert_eq!(plain, ["a", "b"]);
        assert!(plain.iter().all(|c| matches!(c, Cow::Borrowed(_))));
        assert_eq!(string_list_ref(r#"["a\"b"]"#).expect("a list"), [r#"a"b"#]);
        assert!(string_list_ref("").expect("empty").is_empty());
        assert!(string_list_ref("null").expect("null").is_empty());
        assert!(string_list_ref("[1]").is_err());
        assert!(string_list_ref("{}").is_err());
    }
}
