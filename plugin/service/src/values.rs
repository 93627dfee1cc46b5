//! serde_json values <-> protobuf's `Value`/`Struct`, for the few genuinely free-form parts of
//! the API (node statistics, colour legends, communication links).
//!
//! Protobuf's JSON printer refuses NaN and infinities inside a `Value`; JSON cannot hold them
//! either, so they never arise from a parsed column, and the strings `"NaN"`/`"Infinity"` that
//! msprobe's files hold pass through as strings, as TensorBoard's own JSON cleanser sends them.

use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value as PValue};
use serde_json::Value;

/// A JSON value as a protobuf `Value`.
pub fn json_to_prost(value: &Value) -> PValue {
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.is_finite() => Kind::NumberValue(f),
            _ => Kind::StringValue(n.to_string()),
        },
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(ListValue {
            values: items.iter().map(json_to_prost).collect(),
        }),
        Value::Object(_) => Kind::StructValue(json_to_struct(value)),
    };
    PValue { kind: Some(kind) }
}

/// A JSON object as a protobuf `Struct` (anything else is an empty struct).
pub fn json_to_struct(value: &Value) -> Struct {
    match value {
        Value::Object(map) => Struct {
            fields: map
                .iter()
                .map(|(k, v)| (k.clone(), json_to_prost(v)))
                .collect(),
        },
        _ => Struct::default(),
    }
}

/// A protobuf `Value` as JSON.
pub fn prost_to_json(value: &PValue) -> Value {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::NumberValue(f)) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::ListValue(list)) => {
            Value::Array(list.values.iter().map(prost_to_json).collect())
        }
        Some(Kind::StructValue(s)) => Value::Object(
            s.fields
                .iter()
                .map(|(k, v)| (k.clone(), prost_to_json(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip() {
        let v = json!({"a": [1.5, "x", null, true], "b": {"c": "NaN"}});
        assert_eq!(prost_to_json(&json_to_prost(&v)), v);
    }
}
