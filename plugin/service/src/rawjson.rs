//! The big answers rendered as the browser's JSON here, for callers that ask for it.
//!
//! The shim turns answers into msprobe's JSON with the protobuf runtime, in Python: about a
//! microsecond per name and tens of microseconds per layout box, seconds for a whole graph of a
//! million nodes. For the four answers that can be that big (node lists, layouts, filters, matched
//! relations) a caller may send the gRPC metadata [`RAW_JSON_HEADER`]`: 1`; their successful answers
//! then carry the JSON in `raw_json` (and nothing else), which the shim passes through.
//!
//! The JSON is exactly what the shim's `fastjson` makes of the same message: the same keys in the
//! same order, `null` for unset `json_null` fields, non-finite doubles as the strings `"NaN"`,
//! `"Infinity"`, `"-Infinity"`. Numbers are printed by serde_json (shortest round trip), so they
//! parse to the same values as Python's `repr`. `tests/shim` compares both renderings.

use crate::layout::RenderInfo;

/// The gRPC metadata key that asks for `raw_json` answers.
pub const RAW_JSON_HEADER: &str = "graph-ascend-json";

fn push_str(out: &mut Vec<u8>, s: &str) {
    // Node names almost never need escaping: copy those as they are.
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

fn push_key(out: &mut Vec<u8>, key: &str) {
    push_str(out, key);
    out.push(b':');
}

fn push_strings<S: AsRef<str>>(out: &mut Vec<u8>, items: &[S]) {
    out.push(b'[');
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_str(out, s.as_ref());
    }
    out.push(b']');
}

fn push_f64(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        let _ = serde_json::to_writer(&mut *out, &v);
    } else if v.is_nan() {
        out.extend_from_slice(b"\"NaN\"");
    } else if v > 0.0 {
        out.extend_from_slice(b"\"Infinity\"");
    } else {
        out.extend_from_slice(b"\"-Infinity\"");
    }
}

fn push_int(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(v.to_string().as_bytes());
}

fn push_bool(out: &mut Vec<u8>, v: bool) {
    out.extend_from_slice(if v { b"true" } else { b"false" });
}

/// `{"success":true,"data":` … `}` around what `body` writes.
fn envelope(capacity: usize, body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity + 32);
    out.extend_from_slice(b"{\"success\":true,\"data\":");
    body(&mut out);
    out.push(b'}');
    out
}

/// `loadGraphAllNodeList`'s JSON from named lists of names.
pub fn node_list_json<S: AsRef<str>>(lists: &[(&str, Vec<S>)]) -> Vec<u8> {
    let size = lists
        .iter()
        .map(|(name, names)| name.len() + names.iter().map(|s| s.as_ref().len() + 3).sum::<usize>())
        .sum();
    envelope(size, |out| {
        out.push(b'{');
        for (i, (name, names)) in lists.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_key(out, name);
            push_strings(out, names);
        }
        out.push(b'}');
    })
}

/// `changeNodeExpandState`'s JSON from `(name, box)` in display order (no `children`: those are
/// only in `updateHierarchyData` answers, which go through the fields).
pub fn hierarchy_json<'a>(boxes: impl Iterator<Item = (&'a str, &'a RenderInfo)>) -> Vec<u8> {
    let (lower, _) = boxes.size_hint();
    envelope(lower * 260, |out| {
        out.push(b'{');
        for (i, (key, n)) in boxes.enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_key(out, key);
            out.extend_from_slice(b"{\"x\":");
            push_int(out, clamp(n.x));
            out.extend_from_slice(b",\"y\":");
            push_int(out, clamp(n.y));
            out.extend_from_slice(b",\"width\":");
            push_int(out, clamp(n.width));
            out.extend_from_slice(b",\"height\":");
            push_int(out, clamp(n.height));
            out.extend_from_slice(b",\"expand\":");
            push_bool(out, n.expand);
            out.extend_from_slice(b",\"isRoot\":");
            push_bool(out, n.is_root);
            out.extend_from_slice(b",\"parentNode\":");
            push_str(out, &n.parent);
            out.extend_from_slice(b",\"label\":");
            push_str(out, &n.label);
            out.extend_from_slice(b",\"name\":");
            push_str(out, &n.name);
            out.extend_from_slice(b",\"nodeType\":");
            push_int(out, n.kind);
            out.extend_from_slice(b",\"precisionIndex\":");
            match n.precision_index {
                Some(v) => push_f64(out, v),
                None => out.extend_from_slice(b"null"),
            }
            out.extend_from_slice(b",\"overflowLevel\":");
            match &n.overflow_level {
                Some(v) => push_str(out, v),
                None => out.extend_from_slice(b"null"),
            }
            out.extend_from_slice(b",\"matchedNodeLink\":");
            push_strings(out, &n.matched_node_link);
            out.extend_from_slice(b",\"matchedDistributed\":");
            push_json(out, &n.matched_distributed);
            out.push(b'}');
        }
        out.push(b'}');
    })
}

/// A box coordinate as the `int32` of the message.
fn clamp(v: i64) -> i32 {
    v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

/// `matched_distributed` as the shim prints the `Struct` made of it (`json_to_struct`): an
/// object, anything else an empty object; non-finite numbers cannot occur in a JSON value.
fn push_json(out: &mut Vec<u8>, v: &serde_json::Value) {
    match v {
        serde_json::Value::Object(_) => {
            let _ = serde_json::to_writer(&mut *out, v);
        }
        _ => out.extend_from_slice(b"{}"),
    }
}

/// `filterNodes`' JSON from `(name, status)` hits.
pub fn filter_json<N: AsRef<str>, S: AsRef<str>>(hits: &[(N, S)]) -> Vec<u8> {
    let size = hits
        .iter()
        .map(|(n, s)| n.as_ref().len() + s.as_ref().len() + 24)
        .sum();
    envelope(size, |out| {
        out.push(b'[');
        for (i, (name, status)) in hits.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"name\":");
            push_str(out, name.as_ref());
            out.extend_from_slice(b",\"status\":");
            push_str(out, status.as_ref());
            out.push(b'}');
        }
        out.push(b']');
    })
}

fn push_name_iter<'a>(out: &mut Vec<u8>, names: impl Iterator<Item = &'a str>) {
    out.push(b'[');
    for (i, name) in names.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_str(out, name);
    }
    out.push(b']');
}

fn push_pair_iter<'a>(out: &mut Vec<u8>, pairs: impl Iterator<Item = (&'a str, &'a str)>) {
    out.push(b'{');
    for (i, (key, value)) in pairs.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_key(out, key);
        push_str(out, value);
    }
    out.push(b'}');
}

/// `loadGraphMatchedRelations`' JSON from `(name, partner)` rows of each side, which `npu` and
/// `bench` give anew on each call (each is walked twice: unmatched names, then matched pairs).
/// `capacity`: the expected size in bytes.
pub fn matched_relations_json<'a, I, J>(
    npu: impl Fn() -> I,
    bench: impl Fn() -> J,
    capacity: usize,
) -> Vec<u8>
where
    I: Iterator<Item = (&'a str, Option<&'a str>)>,
    J: Iterator<Item = (&'a str, Option<&'a str>)>,
{
    fn unmatched<'a>(
        rows: impl Iterator<Item = (&'a str, Option<&'a str>)>,
    ) -> impl Iterator<Item = &'a str> {
        rows.filter(|(_, link)| link.is_none())
            .map(|(name, _)| name)
    }
    fn matched<'a>(
        rows: impl Iterator<Item = (&'a str, Option<&'a str>)>,
    ) -> impl Iterator<Item = (&'a str, &'a str)> {
        rows.filter_map(|(name, link)| link.map(|l| (name, l)))
    }
    envelope(capacity, |out| {
        out.extend_from_slice(b"{\"npuUnMatchNodes\":");
        push_name_iter(out, unmatched(npu()));
        out.extend_from_slice(b",\"benchUnMatchNodes\":");
        push_name_iter(out, unmatched(bench()));
        out.extend_from_slice(b",\"npuMatchNodes\":");
        push_pair_iter(out, matched(npu()));
        out.extend_from_slice(b",\"benchMatchNodes\":");
        push_pair_iter(out, matched(bench()));
        out.push(b'}');
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn node_lists_escape_as_json() {
        let json = node_list_json(&[("npuNodeList", vec!["a\"b", "ü\n", "plain"])]);
        assert_eq!(
            serde_json::from_slice::<Value>(&json).expect("valid JSON"),
            json!({"success": true, "data": {"npuNodeList": ["a\"b", "ü\n", "plain"]}})
        );
    }

    #[test]
    fn boxes_print_nulls_and_non_finite_numbers_as_the_shim_does() {
        let node = |p: Option<f64>| RenderInfo {
            x: -3,
            y: 0,
            width: 1 << 40,
            height: 15,
            expand: false,
            is_root: false,
            parent: "p".into(),
            label: "l".into(),
            name: "N___n".into(),
            kind: 1,
            matched_node_link: vec![],
            precision_index: p,
            overflow_level: None,
            matched_distributed: json!({}),
            children: vec!["hidden".into()],
        };
        let (a, b, c) = (node(None), node(Some(f64::NAN)), node(Some(0.5)));
        let json = hierarchy_json([("a", &a), ("b", &b), ("c", &c)].into_iter());
        let v: Value = serde_json::from_slice(&json).expect("valid JSON");
        assert_eq!(v["data"]["a"]["precisionIndex"], Value::Null);
        assert_eq!(v["data"]["a"]["overflowLevel"], Value::Null);
        assert_eq!(v["data"]["a"]["x"], -3);
        assert_eq!(v["data"]["a"]["width"], i32::MAX);
        assert_eq!(v["data"]["a"]["matchedDistributed"], json!({}));
        assert!(v["data"]["a"].get("children").is_none());
        assert_eq!(v["data"]["b"]["precisionIndex"], "NaN");
        assert_eq!(v["data"]["c"]["precisionIndex"], 0.5);
    }
}
