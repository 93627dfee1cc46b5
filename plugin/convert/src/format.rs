//! Node data as the `.vis.db` stores it (msprobe's `format_node_data`).
//!
//! Every value becomes text: strings lose their `'` quotes and long decimal strings are rounded
//! to 6 places (`"0.0722801234%"` → `"0.072280%"`), `None` becomes `"null"`, other values are
//! Python's `str()`. An item whose `Max` ends up `"null"` (a `None` in the dump) collapses to
//! `{"value": "null"}`.

use graph_ascend_dump::{Item, PackedItem, PyVal, ValRef};

use crate::pyjson::push_str;

/// What to drop from items.
#[derive(Debug, Clone, Copy, Default)]
pub struct FormatOptions {
    /// Keep the `md5` field (md5 compare mode).
    pub keep_md5: bool,
    /// The node is a `batch_isend_irecv` (its p2p fields are dropped).
    pub batch_p2p: bool,
}

const PROCESS_GROUP_KEYS: [&str; 4] = ["type", "group_ranks", "group_id", "data_name"];

/// `json.dumps(format_node_data(items))`.
pub fn node_data_json(items: &[(String, PackedItem)], opts: FormatOptions) -> String {
    let mut out = String::with_capacity(64 + items.len() * 320);
    let mut scratch = String::new();
    out.push('{');
    for (i, (name, item)) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_str(&mut out, name);
        out.push_str(": ");
        push_item(&mut out, item, opts, &mut scratch);
    }
    out.push('}');
    out
}

/// [`node_data_json`] of unpacked items.
pub fn items_data_json(items: &[(String, Item)], opts: FormatOptions) -> String {
    let packed: Vec<(String, PackedItem)> = items
        .iter()
        .map(|(n, it)| (n.clone(), PackedItem::pack(it)))
        .collect();
    node_data_json(&packed, opts)
}

/// `true` when msprobe writes the value as `"null"`.
fn is_null_text(v: ValRef) -> bool {
    match v {
        ValRef::None => true,
        ValRef::Str(s) => s.len() >= 4 && s.bytes().filter(|&b| b != b'\'').eq("None".bytes()),
        _ => false,
    }
}

fn push_item(out: &mut String, item: &PackedItem, opts: FormatOptions, scratch: &mut String) {
    let is_group = item.get("type").and_then(ValRef::as_str) == Some("torch.ProcessGroup");
    let keep = |k: &str| {
        !(k == "state"
            || k == "full_op_name"
            || (k == "md5" && !opts.keep_md5)
            || (opts.batch_p2p && matches!(k, "op" | "peer" | "tag" | "group_id"))
            || (is_group && !PROCESS_GROUP_KEYS.contains(&k)))
    };
    let null_max = item
        .fields()
        .any(|(k, v)| k == "Max" && keep(k) && is_null_text(v));
    if null_max {
        out.push_str("{\"value\": \"null\"}");
        return;
    }
    out.push('{');
    let mut first = true;
    for (k, v) in item.fields() {
        if !keep(k) {
            continue;
        }
        if !first {
            out.push_str(", ");
        }
        first = false;
        push_str(out, k);
        out.push_str(": ");
        match v {
            // Common cases without an intermediate string.
            ValRef::Float(f) => {
                out.push('"');
                graph_ascend_dump::pyval::push_float_repr(out, f);
                out.push('"');
            }
            ValRef::Str(t) if !t.contains('\'') && t != "None" && !t.contains('.') => {
                push_str(out, t)
            }
            other => {
                scratch.clear();
                value_text_into(scratch, other);
                push_str(out, scratch);
            }
        }
    }
    out.push('}');
}

/// [`value_text`] of a packed value, written into `out`.
fn value_text_into(out: &mut String, v: ValRef) {
    match v {
        ValRef::None => out.push_str("null"),
        ValRef::Str(s) => {
            let s = s.replace('\'', "");
            if s == "None" {
                out.push_str("null");
            } else {
                match round_decimal(&s) {
                    Some(r) => out.push_str(&r),
                    None => out.push_str(&s),
                }
            }
        }
        other => graph_ascend_dump::packed::write_py_str(out, other),
    }
}

/// One value as msprobe writes it.
pub fn value_text(v: &PyVal) -> String {
    match v {
        PyVal::None => "null".into(),
        PyVal::Str(s) => {
            let s = s.replace('\'', "");
            if s == "None" {
                return "null".into();
            }
            round_decimal(&s).unwrap_or(s)
        }
        other => other.py_str(),
    }
}

/// `^\d{1,20}\.\d{1,20}%?$` with more than 6 decimals → rounded to 6.
fn round_decimal(s: &str) -> Option<String> {
    let (body, pct) = match s.strip_suffix('%') {
        Some(b) => (b, "%"),
        None => (s, ""),
    };
    let (int, frac) = body.split_once('.')?;
    let digits = |t: &str| !t.is_empty() && t.len() <= 20 && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !digits(frac) || frac.len() <= 6 {
        return None;
    }
    let f: f64 = body.parse().ok()?;
    Some(format!("{f:.6}{pct}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_become_msprobe_text() {
        assert_eq!(value_text(&PyVal::Str("2.2248543%".into())), "2.224854%");
        assert_eq!(value_text(&PyVal::Str("68.75%".into())), "68.75%");
        assert_eq!(value_text(&PyVal::Str("-0.12345678".into())), "-0.12345678");
        assert_eq!(
            value_text(&PyVal::Str("<class 'int'>".into())),
            "<class int>"
        );
        assert_eq!(value_text(&PyVal::Float(1e-5)), "1e-05");
        assert_eq!(value_text(&PyVal::Bool(false)), "False");
        assert_eq!(value_text(&PyVal::None), "null");
    }

    #[test]
    fn null_max_collapses() {
        let item = Item {
            fields: vec![
                ("Max".into(), PyVal::None),
                ("data_name".into(), PyVal::Str("-1".into())),
            ],
        };
        let s = items_data_json(&[("a.input.0".into(), item)], FormatOptions::default());
        assert_eq!(s, r#"{"a.input.0": {"value": "null"}}"#);
    }
}
