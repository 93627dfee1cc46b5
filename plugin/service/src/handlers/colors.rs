//! The colour legend route, `updateColors` (`docs/msprobe-api.md` §4).

use graph_ascend_proto as pb;
use serde_json::Value;

use super::reply::{answer, ColorsError, HandlerError, Result, StoreContext};
use super::selection::{lang_of, select};
use crate::messages::Msg;
use crate::state::State;

/// `updateColors`: checks the legend as msprobe does and stores it in the file.
pub fn update_colors(state: &State, req: pb::UpdateColorsRequest) -> pb::StatusResponse {
    answer(lang_of(req.meta_data.as_ref()), store_colors(state, &req))
}

fn store_colors(state: &State, req: &pb::UpdateColorsRequest) -> Result<pb::StatusResponse> {
    let sel = select(state, req.meta_data.as_ref())?;
    let colors = validate_colors(&req.colors).map_err(HandlerError::Colors)?;
    let text = graph_ascend_convert::pyjson::value(&colors);
    sel.file
        .with_writable_store(|s| s.write(|s| s.set_node_colors(&text)))
        .context(Msg::UpdateColor)?;
    Ok(pb::StatusResponse {
        success: true,
        error: None,
    })
}

/// Strings msprobe's `is_safe_string` refuses in a colour description.
const UNSAFE_MARKERS: [&str; 8] = [
    "<script",
    "<img",
    "<iframe",
    "javascript:",
    "onerror=",
    "onload=",
    "<svg",
    "eval(",
];

/// The unmatched-node markers a colour's value may be instead of a range.
const UNMATCHED_MARKERS: [&str; 3] = ["无匹配节点", "N/A", "No matching nodes"];

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
    out
}

/// msprobe's `validate_colors_param`; the error texts are msprobe's (English in both languages).
pub(crate) fn validate_colors(text: &str) -> std::result::Result<Value, ColorsError> {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
        return Err(ColorsError::NotObject);
    };
    if map.is_empty() {
        return Err(ColorsError::Empty);
    }
    let mut out = serde_json::Map::new();
    for (key, value) in map {
        let hex = key.len() == 7
            && key.starts_with('#')
            && key[1..].bytes().all(|b| b.is_ascii_hexdigit());
        if !hex {
            return Err(ColorsError::IllegalKey(key));
        }
        let Value::Object(mut entry) = value else {
            return Err(ColorsError::NotAnObject(key));
        };
        let Some(range) = entry.get("value") else {
            return Err(ColorsError::NoValue(key));
        };
        match range {
            Value::Array(items) => {
                if items.len() != 2 {
                    return Err(ColorsError::NotAPair(key));
                }
                let (Some(lo), Some(hi)) = (items[0].as_f64(), items[1].as_f64()) else {
                    return Err(ColorsError::NotNumbers(key));
                };
                if lo >= hi {
                    return Err(ColorsError::EmptyRange(key));
                }
            }
            Value::String(s) if UNMATCHED_MARKERS.contains(&s.as_str()) => {}
            Value::String(s) => return Err(ColorsError::UnsupportedValue(s.clone())),
            _ => return Err(ColorsError::WrongType(key)),
        }
        if let Some(d) = entry.get("description") {
            let Some(d) = d.as_str() else {
                return Err(ColorsError::DescriptionNotText(key));
            };
            let lower = d.to_ascii_lowercase();
            if d.len() > 4096 || UNSAFE_MARKERS.iter().any(|m| lower.contains(m)) {
                return Err(ColorsError::DescriptionRefused(key));
            }
            entry.insert("description".into(), Value::String(html_escape(d)));
        }
        out.insert(key, Value::Object(entry));
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_validated_as_msprobe_does() {
        assert_eq!(
            validate_colors("{\"red\": {\"value\": [0, 1]}}")
                .unwrap_err()
                .to_string(),
            "Illegal color key: red"
        );
        assert!(validate_colors("[]").is_err());
        assert!(validate_colors("{\"#FFFFFF\": {\"value\": [1, 0]}}").is_err());
        assert!(validate_colors(
            "{\"#FFFFFF\": {\"value\": [0, 1], \"description\": \"<script>\"}}"
        )
        .is_err());
        let ok = validate_colors("{\"#FFFFFF\": {\"value\": [0, 1], \"description\": \"a<b\"}, \"#C7C7C7\": {\"value\": \"N/A\"}}")
            .expect("valid");
        assert_eq!(ok["#FFFFFF"]["description"], "a&lt;b");
    }
}
