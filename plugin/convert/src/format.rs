//! Node data as the `.vis.db` stores it (msprobe's `format_node_data`).
//!
//! Every value becomes text: strings lose their `'` quotes and long decimal strings are rounded
//! to 6 places (`"0.0722801234%"` → `"0.072280%"`), `None` becomes `"null"` (also inside a
//! string: `"<class 'NoneType'>"` → `"<class nullType>"`), other values are
//! Python's `str()`. An item whose `Max` ends up `"null"` (a `None` in the dump) collapses to
//! `{"value": "null"}`.

use graph_ascend_dump::{PackedItem, ValRef};

use crate::pyjson::{escaped_len, push_str, Escaped};

/// What to drop from items.
#[derive(Debug, Clone, Copy, Default)]
pub struct FormatOptions {
    /// Keep the `md5` field (md5 compare mode).
    pub keep_md5: bool,
    /// The node is a `batch_isend_irecv` (its p2p fields are dropped).
    pub batch_p2p: bool,
    /// msprobe formats these items a second time ([`crate::node::FormattedTwice`]): each
    /// value's text is formatted again as a string.
    pub twice: bool,
}

const PROCESS_GROUP_KEYS: [&str; 4] = ["type", "group_ranks", "group_id", "data_name"];

/// `json.dumps(format_node_data(items))`.
///
/// msprobe repeats a scalar's value in `Max`, `Min`, `Mean`, `Norm` and `value`, so the text of
/// a long value is several times its size; grown by doubling it would briefly take twice that
/// again. Items larger than [`EXACT_FROM`] are measured first ([`TextLen`]), and the text is
/// made in a string of exactly its length.
pub fn node_data_json(items: &[(String, PackedItem)], opts: FormatOptions) -> String {
    let packed: usize = items.iter().map(|(n, it)| n.len() + it.heap_size()).sum();
    let capacity = if packed > EXACT_FROM {
        let mut len = TextLen::default();
        write_node_data(&mut len, items, opts);
        len.len
    } else {
        64 + items.len() * 320
    };
    let mut out = String::with_capacity(capacity);
    write_node_data(&mut out, items, opts);
    out
}

/// Packed items larger than this are measured before their text is made.
const EXACT_FROM: usize = 1 << 20;

fn write_node_data(out: &mut impl TextOut, items: &[(String, PackedItem)], opts: FormatOptions) {
    let mut scratch = String::new();
    out.push_str("{");
    for (i, (name, item)) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_json_str(name);
        out.push_str(": ");
        push_item(out, item, opts, &mut scratch);
    }
    out.push_str("}");
}

/// Where node data goes: its text, or only the text's length ([`TextLen`]).
trait TextOut {
    fn push_str(&mut self, s: &str);
    /// `s` as a JSON string literal ([`push_str`]).
    fn push_json_str(&mut self, s: &str);
    /// Python's `repr` of `f`.
    fn push_float(&mut self, f: f64);
    /// A writer of text escaped as inside a JSON string literal ([`Escaped`]).
    fn escaped(&mut self) -> impl std::fmt::Write + '_;
}

impl TextOut for String {
    fn push_str(&mut self, s: &str) {
        String::push_str(self, s);
    }
    fn push_json_str(&mut self, s: &str) {
        push_str(self, s);
    }
    fn push_float(&mut self, f: f64) {
        graph_ascend_dump::pyval::push_float_repr(self, f);
    }
    fn escaped(&mut self) -> impl std::fmt::Write + '_ {
        Escaped(self)
    }
}

/// The length of the text that would be written, counted without writing it.
#[derive(Default)]
struct TextLen {
    len: usize,
    float: String,
}

/// [`Escaped`], counting.
struct EscapedLen<'l>(&'l mut usize);

impl std::fmt::Write for EscapedLen<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        *self.0 += escaped_len(s);
        Ok(())
    }
}

impl TextOut for TextLen {
    fn push_str(&mut self, s: &str) {
        self.len += s.len();
    }
    fn push_json_str(&mut self, s: &str) {
        self.len += escaped_len(s) + 2;
    }
    fn push_float(&mut self, f: f64) {
        self.float.clear();
        graph_ascend_dump::pyval::push_float_repr(&mut self.float, f);
        self.len += self.float.len();
    }
    fn escaped(&mut self) -> impl std::fmt::Write + '_ {
        EscapedLen(&mut self.len)
    }
}

/// `true` when msprobe writes the value as `"null"`.
fn is_null_text(v: ValRef) -> bool {
    match v {
        ValRef::None => true,
        ValRef::Str(s) => s.len() >= 4 && s.bytes().filter(|&b| b != b'\'').eq("None".bytes()),
        _ => false,
    }
}

/// Codes of the field names the formatter tests, and each known name as it is written.
struct Codes {
    type_: Option<u8>,
    max: Option<u8>,
    /// Always dropped: `state`, `full_op_name`.
    dropped: u64,
    md5: u64,
    /// Dropped from `batch_isend_irecv` nodes: `op`, `peer`, `tag`, `group_id`.
    p2p: u64,
    /// Kept for process groups: [`PROCESS_GROUP_KEYS`].
    group_kept: u64,
    /// `"<name>": ` of each known name, by code.
    quoted: Vec<String>,
}

fn codes() -> &'static Codes {
    static CODES: std::sync::OnceLock<Codes> = std::sync::OnceLock::new();
    CODES.get_or_init(|| {
        let mask = |names: &[&str]| {
            names
                .iter()
                .filter_map(|n| graph_ascend_dump::packed::field_code(n))
                .fold(0u64, |m, c| m | 1 << c)
        };
        Codes {
            type_: graph_ascend_dump::packed::field_code("type"),
            max: graph_ascend_dump::packed::field_code("Max"),
            dropped: mask(&["state", "full_op_name"]),
            md5: mask(&["md5"]),
            p2p: mask(&["op", "peer", "tag", "group_id"]),
            group_kept: mask(&PROCESS_GROUP_KEYS),
            quoted: graph_ascend_dump::packed::known_field_names()
                .iter()
                .map(|name| {
                    let mut q = String::new();
                    push_str(&mut q, name);
                    q.push_str(": ");
                    q
                })
                .collect(),
        }
    })
}

fn push_item(out: &mut impl TextOut, item: &PackedItem, opts: FormatOptions, scratch: &mut String) {
    let c = codes();
    // The item's type (its first `type` field) and whether a `Max` is msprobe's "null".
    let mut type_seen = false;
    let mut is_group = false;
    let mut null_max = false;
    for (k, v) in item.coded_fields() {
        if k.code.is_none() {
            continue;
        }
        if k.code == c.type_ && !type_seen {
            type_seen = true;
            is_group = v.as_str() == Some("torch.ProcessGroup");
        } else if k.code == c.max && !null_max {
            null_max = is_null_text(v);
        }
    }
    // A process group keeps only its own fields, `Max` among the dropped ones.
    if null_max && !is_group {
        out.push_str("{\"value\": \"null\"}");
        return;
    }
    let mut drop = c.dropped;
    if !opts.keep_md5 {
        drop |= c.md5;
    }
    if opts.batch_p2p {
        drop |= c.p2p;
    }
    if is_group {
        drop |= !c.group_kept;
    }
    out.push_str("{");
    let mut first = true;
    for (k, v) in item.coded_fields() {
        let kept = match k.code {
            Some(code) => code >= 64 || drop & (1 << code) == 0,
            None => !is_group,
        };
        if !kept {
            continue;
        }
        if !first {
            out.push_str(", ");
        }
        first = false;
        match k.code.and_then(|code| c.quoted.get(usize::from(code))) {
            Some(q) => out.push_str(q),
            None => {
                out.push_json_str(k.name);
                out.push_str(": ");
            }
        }
        if opts.twice {
            scratch.clear();
            value_text_into(scratch, v);
            // `_format_data` on its own text: quotes dropped, every `None` made `null`, rounded.
            let again = scratch.replace('\'', "").replace("None", "null");
            out.push_json_str(&round_decimal(&again).unwrap_or(again));
            continue;
        }
        match v {
            // Common cases without an intermediate string.
            ValRef::Float(f) => {
                out.push_str("\"");
                out.push_float(f);
                out.push_str("\"");
            }
            ValRef::Str(t) if !t.contains('\'') && !t.contains("None") && !t.contains('.') => {
                out.push_json_str(t)
            }
            // A list or dict is written escaped straight into the row: a long one is never
            // held a second time as text.
            ValRef::Nested(_) => {
                out.push_str("\"");
                graph_ascend_dump::packed::write_py_str(&mut out.escaped(), v);
                out.push_str("\"");
            }
            other => {
                scratch.clear();
                value_text_into(scratch, other);
                out.push_json_str(scratch);
            }
        }
    }
    out.push_str("}");
}

/// One value as msprobe writes it, into `out`.
fn value_text_into(out: &mut String, v: ValRef) {
    match v {
        ValRef::None => out.push_str("null"),
        ValRef::Str(s) => {
            // msprobe replaces every `None` in a string, not only a whole `None`
            let s = s.replace('\'', "").replace("None", "null");
            match round_decimal(&s) {
                Some(r) => out.push_str(&r),
                None => out.push_str(&s),
            }
        }
        other => graph_ascend_dump::packed::write_py_str(out, other),
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
    use graph_ascend_dump::{Item, PyVal};

    /// [`node_data_json`] of unpacked items.
    fn items_data_json(items: &[(String, Item)], opts: FormatOptions) -> String {
        let packed: Vec<(String, PackedItem)> = items
            .iter()
            .map(|(n, it)| (n.clone(), PackedItem::pack(it)))
            .collect();
        node_data_json(&packed, opts)
    }

    /// [`value_text_into`] of an unpacked value (through a packed item, as rows are written).
    fn value_text(v: &PyVal) -> String {
        let item = Item {
            fields: vec![("Max".into(), v.clone())],
        };
        let packed = PackedItem::pack(&item);
        let mut out = String::new();
        if let Some(v) = packed.get("Max") {
            value_text_into(&mut out, v);
        }
        out
    }

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
        assert_eq!(value_text(&PyVal::Str("None".into())), "null");
        assert_eq!(
            value_text(&PyVal::Str("<class 'NoneType'>".into())),
            "<class nullType>"
        );
        assert_eq!(value_text(&PyVal::Str("group_None".into())), "group_null");
    }

    #[test]
    fn dropped_fields_follow_the_item_kind_and_options() {
        let group = Item {
            fields: vec![
                ("type".into(), PyVal::Str("torch.ProcessGroup".into())),
                (
                    "group_ranks".into(),
                    PyVal::List(vec![PyVal::Int(0), PyVal::Int(1)]),
                ),
                ("Max".into(), PyVal::None),
                ("extra key".into(), PyVal::Int(1)),
                ("group_id".into(), PyVal::Int(7)),
                ("md5".into(), PyVal::Str("0badf00d".into())),
                ("data_name".into(), PyVal::Str("-1".into())),
            ],
        };
        let p2p = Item {
            fields: vec![
                ("op".into(), PyVal::Str("isend".into())),
                ("Max".into(), PyVal::Float(1.0)),
                ("peer".into(), PyVal::Int(1)),
                ("tag".into(), PyVal::Int(0)),
                ("group_id".into(), PyVal::Int(3)),
                ("state".into(), PyVal::Str("x".into())),
                ("full_op_name".into(), PyVal::Str("y".into())),
                ("md5".into(), PyVal::Str("abc".into())),
                ("extra key".into(), PyVal::Bool(true)),
            ],
        };
        let json = |item: &Item, keep_md5, batch_p2p| {
            items_data_json(
                &[("n".into(), item.clone())],
                FormatOptions {
                    keep_md5,
                    batch_p2p,
                    ..FormatOptions::default()
                },
            )
        };
        assert_eq!(
            json(&group, true, false),
            r#"{"n": {"type": "torch.ProcessGroup", "group_ranks": "[0, 1]", "group_id": "7", "data_name": "-1"}}"#
        );
        assert_eq!(
            json(&p2p, false, true),
            r#"{"n": {"Max": "1.0", "extra key": "True"}}"#
        );
        assert_eq!(
            json(&p2p, true, false),
            r#"{"n": {"op": "isend", "Max": "1.0", "peer": "1", "tag": "0", "group_id": "3", "md5": "abc", "extra key": "True"}}"#
        );
    }

    /// The measured length of node data is its text's, whatever it holds (escapes, characters
    /// beyond ASCII, floats, nested values, dropped fields, the null collapse), and a long item's
    /// text is made in a string of exactly its length.
    #[test]
    fn measured_length_is_the_texts() {
        let text = PyVal::Str("a \"q\" \\ \n\t 中文 🙂 \u{7f}\u{1} 'x' 1.23456789 None".into());
        let nested = PyVal::List(vec![
            PyVal::Float(1e-7),
            text.clone(),
            PyVal::Dict(vec![
                ("k 中".into(), PyVal::Float(2.5)),
                ("b".into(), PyVal::Bool(true)),
            ]),
            PyVal::None,
            PyVal::Int(-3),
        ]);
        let items = [
            Item {
                fields: vec![
                    ("type".into(), PyVal::Str("list".into())),
                    ("value".into(), nested.clone()),
                    ("Max".into(), PyVal::Float(3.0e16)),
                    ("Min".into(), text.clone()),
                    ("名字".into(), PyVal::Str("0.0722801234%".into())),
                    ("md5".into(), PyVal::Str("abc".into())),
                ],
            },
            Item {
                fields: vec![("Max".into(), PyVal::None), ("x".into(), text)],
            },
        ];
        for keep_md5 in [false, true] {
            let opts = FormatOptions {
                keep_md5,
                ..FormatOptions::default()
            };
            let packed: Vec<(String, PackedItem)> = items
                .iter()
                .enumerate()
                .map(|(i, it)| (format!("n.input.{i} \"中\""), PackedItem::pack(it)))
                .collect();
            let mut len = TextLen::default();
            write_node_data(&mut len, &packed, opts);
            let json = node_data_json(&packed, opts);
            assert_eq!(len.len, json.len(), "{json}");
        }
        let long = Item {
            fields: vec![(
                "value".into(),
                PyVal::List(vec![PyVal::Float(1.5); 300_000]),
            )],
        };
        let packed = [("a.input.0".to_owned(), PackedItem::pack(&long))];
        assert!(packed[0].1.heap_size() > EXACT_FROM);
        let json = node_data_json(&packed, FormatOptions::default());
        assert_eq!(json.capacity(), json.len());
    }

    #[test]
    fn formatted_twice_rounds_the_first_texts() {
        let item = Item {
            fields: vec![
                ("Max".into(), PyVal::Float(0.3998635961640844)),
                ("Min".into(), PyVal::Float(-9.101584354360721)),
                ("Norm".into(), PyVal::Float(21.988752443524078)),
                ("data_name".into(), PyVal::Str("-1".into())),
                ("requires_grad".into(), PyVal::None),
            ],
        };
        let items = [("n".to_string(), item)];
        let once = items_data_json(&items, FormatOptions::default());
        assert_eq!(
            once,
            r#"{"n": {"Max": "0.3998635961640844", "Min": "-9.101584354360721", "Norm": "21.988752443524078", "data_name": "-1", "requires_grad": "null"}}"#
        );
        let twice = items_data_json(
            &items,
            FormatOptions {
                twice: true,
                ..FormatOptions::default()
            },
        );
        // msprobe's second pass: positive long decimals rounded, the negative one kept.
        assert_eq!(
            twice,
            r#"{"n": {"Max": "0.399864", "Min": "-9.101584354360721", "Norm": "21.988752", "data_name": "-1", "requires_grad": "null"}}"#
        );
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
