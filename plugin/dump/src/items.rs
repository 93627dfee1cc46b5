//! One dump.json entry → the flat per-tensor items msprobe shows for a node.
//!
//! msprobe flattens every op's `input_args` / `input_kwargs` / `input` / `output` / `parameters`
//! (and `parameters_grad` entries) into items named `<op>.input.0`, `<op>.input.<kwarg>`,
//! `<op>.parameters.weight`, `<op>.output.0.1`…, each a small dict of statistics. The fields, their
//! order and their Python types are kept as msprobe has them, because the `.vis.db` stores their
//! `str()` and the comparator reads them back.

use std::borrow::Cow;

use serde_json::Value;

use crate::fastjson::JVal;
use crate::pyval::PyVal;

/// A field name: the names msprobe uses are static (no allocation per item), others owned.
pub type FieldName = Cow<'static, str>;

/// Which way a compare metric gets worse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worse {
    /// A larger `|value|` is worse; 0 is perfect (differences, errors, distances).
    Higher,
    /// A value below 1 is worse; 1.0 is perfect (Cosine, the share of elements within a
    /// tolerance).
    Lower,
}

impl Worse {
    /// The name the page reads: `"higher"` or `"lower"`.
    pub fn name(self) -> &'static str {
        match self {
            Worse::Higher => "higher",
            Worse::Lower => "lower",
        }
    }
}

/// How a compare metric is read: its column, which way it gets worse, and how far from perfect
/// a value may be before it is worth pointing at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricRule {
    pub name: &'static str,
    pub worse: Worse,
    /// The distance from perfect (`|value|` for [`Worse::Higher`], `1 - value` for
    /// [`Worse::Lower`]; percent strings such as `"0.2685%"` read as fractions) at or below
    /// which a difference is float rounding, not an error: it is not painted.
    pub threshold: f64,
}

impl MetricRule {
    /// How far `value` (a fraction for percent columns) is from perfect; `NaN` stays `NaN`.
    pub fn distance(&self, value: f64) -> f64 {
        match self.worse {
            Worse::Higher => value.abs(),
            Worse::Lower => 1.0 - value,
        }
    }

    /// Whether `value` is far enough from perfect to be pointed at.
    pub fn is_notable(&self, value: f64) -> bool {
        self.distance(value) > self.threshold
    }
}

/// Absolute differences at or below this are float32 rounding of values of order one (its
/// epsilon is 1.2e-7): a Mean diff of -6.4e-9 is not an error.
const ABS_ROUNDING: f64 = 1e-6;
/// Relative errors at or below one thousandth are within msprobe's own tolerance (the
/// "One Thousandth Err Ratio" counts elements within it).
const REL_TOLERANCE: f64 = 1e-3;

const fn rule(name: &'static str, worse: Worse, threshold: f64) -> MetricRule {
    MetricRule {
        name,
        worse,
        threshold,
    }
}

/// The one table of compare metrics, in msprobe's column order (the order the converter
/// writes them and the page shows them): the first metrics of [`COMPARE_COLUMNS`]. The
/// service serves it with each file's config (`detailColumns`), the page paints from it, and
/// metrics not in it (users' own) are never painted.
pub const METRIC_RULES: &[MetricRule] = &[
    rule("Max diff", Worse::Higher, ABS_ROUNDING),
    rule("Min diff", Worse::Higher, ABS_ROUNDING),
    rule("Mean diff", Worse::Higher, ABS_ROUNDING),
    rule("L2norm diff", Worse::Higher, ABS_ROUNDING),
    rule("MaxRelativeErr", Worse::Higher, REL_TOLERANCE),
    rule("MinRelativeErr", Worse::Higher, REL_TOLERANCE),
    rule("MeanRelativeErr", Worse::Higher, REL_TOLERANCE),
    rule("NormRelativeErr", Worse::Higher, REL_TOLERANCE),
    // 1 - Cosine is about half the squared relative distance: 1e-6 is a 0.14% distance.
    rule("Cosine", Worse::Lower, 1e-6),
    rule("EucDist", Worse::Higher, ABS_ROUNDING),
    rule("MaxAbsErr", Worse::Higher, ABS_ROUNDING),
    // Any element outside the tolerance is worth pointing at.
    rule("One Thousandth Err Ratio", Worse::Lower, 0.0),
    rule("Five Thousandths Err Ratio", Worse::Lower, 0.0),
];

/// The rule of a metric column, `None` for other columns and users' own metrics.
pub fn metric_rule(name: &str) -> Option<&'static MetricRule> {
    METRIC_RULES.iter().find(|r| r.name == name)
}

/// msprobe's verdict columns, after the metrics in [`COMPARE_COLUMNS`].
const VERDICT_COLUMNS: [&str; 4] = [
    "Requires_grad Consistent",
    "Result",
    "Err_message",
    "Accuracy Reached or Not",
];

/// The columns a comparison adds to an item, in the order msprobe writes them (the service
/// removes them again when a match is undone): the metrics of [`METRIC_RULES`], then the
/// verdict columns.
pub const COMPARE_COLUMNS: [&str; METRIC_RULES.len() + VERDICT_COLUMNS.len()] = {
    let mut out = [""; METRIC_RULES.len() + VERDICT_COLUMNS.len()];
    let mut i = 0;
    while i < METRIC_RULES.len() {
        out[i] = METRIC_RULES[i].name;
        i += 1;
    }
    let mut j = 0;
    while j < VERDICT_COLUMNS.len() {
        out[i + j] = VERDICT_COLUMNS[j];
        j += 1;
    }
    out
};

/// The metric columns of statistics mode, in msprobe's compare-table order: the first eight of
/// [`COMPARE_COLUMNS`].
pub const STATISTICS_METRIC_COLUMNS: &[&str] = COMPARE_COLUMNS.as_slice().split_at(8).0;

/// The metric columns of tensor mode, in msprobe's compare-table order (a subset of
/// [`COMPARE_COLUMNS`]).
pub const TENSOR_METRIC_COLUMNS: [&str; 6] = [
    "Cosine",
    "EucDist",
    "MaxAbsErr",
    "MaxRelativeErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
];

/// The field names that occur in dumps, before and after [`COMPARE_COLUMNS`] in
/// [`KNOWN_FIELDS`].
const DUMP_FIELDS: [&str; 18] = [
    "type",
    "dtype",
    "shape",
    "Max",
    "Min",
    "Mean",
    "Norm",
    "requires_grad",
    "data_name",
    "md5",
    "value",
    "group_ranks",
    "group_id",
    "state",
    "full_op_name",
    "op",
    "peer",
    "tag",
];
const DUMP_FIELDS_LAST: [&str; 2] = ["src", "dst"];

/// The field names that occur in dumps and in compare results, shared by every item (an
/// item's packed form stores a name as its index here).
pub(crate) const KNOWN_FIELDS: [&str; 37] =
    concat_names([&DUMP_FIELDS, &COMPARE_COLUMNS, &DUMP_FIELDS_LAST]);

/// The name lists `parts` one after the other (`N` must be their total length).
const fn concat_names<const N: usize>(parts: [&[&'static str]; 3]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut k = 0;
    let mut p = 0;
    while p < parts.len() {
        let mut i = 0;
        while i < parts[p].len() {
            out[k] = parts[p][i];
            k += 1;
            i += 1;
        }
        p += 1;
    }
    assert!(k == N, "KNOWN_FIELDS: the parts do not add up");
    out
}

/// The fields the page's details table never shows as columns (`data_name` and `value` are
/// shown in other ways).
const HIDDEN_IN_DETAILS: [&str; 2] = ["data_name", "value"];

/// The known columns of the page's details table, in the order it shows them (a table keeps
/// this order whatever its first row holds, so columns do not move between nodes; unknown
/// columns follow in the file's order).
pub fn detail_columns() -> impl Iterator<Item = &'static str> {
    KNOWN_FIELDS
        .iter()
        .copied()
        .filter(|f| !HIDDEN_IN_DETAILS.contains(f))
}

/// `name` as a [`FieldName`]: borrowed from a static table when it is a known name.
pub fn field_name(name: &str) -> FieldName {
    match known_field(name) {
        Some(i) => Cow::Borrowed(KNOWN_FIELDS[i]),
        None => Cow::Owned(name.to_string()),
    }
}

/// Position of `name` in [`KNOWN_FIELDS`].
pub(crate) fn known_field(name: &str) -> Option<usize> {
    static LOOKUP: std::sync::OnceLock<Lookup> = std::sync::OnceLock::new();
    LOOKUP
        .get_or_init(|| Lookup::new(&KNOWN_FIELDS))
        .find(&KNOWN_FIELDS, name)
}

/// Finds a string in a small fixed table. This runs for every field and string value of every
/// item, so candidates are kept by length and first byte, and bytes are compared only for those.
pub(crate) struct Lookup {
    /// `by_len[n]`: `(first byte, index)` of the table's strings of `n` bytes.
    by_len: Vec<Vec<(u8, usize)>>,
}

impl Lookup {
    pub(crate) fn new(table: &[&str]) -> Lookup {
        let longest = table.iter().map(|t| t.len()).max().unwrap_or(0);
        let mut by_len = vec![Vec::new(); longest + 1];
        for (i, t) in table.iter().enumerate() {
            by_len[t.len()].push((t.as_bytes().first().copied().unwrap_or(0), i));
        }
        Lookup { by_len }
    }

    /// Position of `s` in `table` (the table this lookup was made from).
    #[inline]
    pub(crate) fn find(&self, table: &[&str], s: &str) -> Option<usize> {
        let candidates = self.by_len.get(s.len())?;
        let first = s.as_bytes().first().copied().unwrap_or(0);
        candidates
            .iter()
            .find(|&&(f, i)| f == first && table[i] == s)
            .map(|&(_, i)| i)
    }
}

/// One flattened tensor (or scalar) of a node: ordered `(field, value)` pairs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Item {
    pub fields: Vec<(FieldName, PyVal)>,
}

impl Item {
    /// The value of a field.
    pub fn get(&self, key: &str) -> Option<&PyVal> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Sets a field, keeping its position if it exists, else appending it.
    pub fn set(&mut self, key: &str, value: PyVal) {
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.fields.push((field_name(key), value)),
        }
    }

    /// `True` for the placeholder msprobe makes for a `null` value in the dump.
    pub fn is_placeholder(&self) -> bool {
        self.get("type").is_none() && self.get("Max").is_none_or(PyVal::is_none)
    }

    /// A field as Python `str()` text (`None` → `"None"`), or `None` if absent.
    pub fn text(&self, key: &str) -> Option<String> {
        self.get(key).map(PyVal::py_str)
    }
}

/// The items of one op, split as msprobe splits them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpData {
    /// Inputs, keyword inputs and parameters (and parameter gradients), in dump order.
    pub input: Vec<(String, Item)>,
    /// Outputs.
    pub output: Vec<(String, Item)>,
}

/// Flattens one dump.json entry (`data[op_name]`).
pub fn parse_op(op_name: &str, entry: &Value) -> OpData {
    parse_op_fast(op_name, &JVal::from_value(entry))
}

/// [`parse_op`] of an entry read by the fast reader ([`crate::fastjson`]).
pub fn parse_op_fast(op_name: &str, entry: &JVal) -> OpData {
    let (input, output) = flatten(
        op_name,
        entry,
        &|name, leaf| leaf_item(name, leaf),
        &|item| item,
    );
    OpData { input, output }
}

/// Makes the item of one leaf dict: `(position name, its fields)`.
pub(crate) type LeafFn<'w, T> = dyn Fn(&str, &[(Cow<str>, JVal)]) -> T + 'w;

/// Named items of one op.
type Named<T> = Vec<(String, T)>;

/// Inputs and outputs of one entry: its leaves, each made by `leaf`, or made as an [`Item`] first
/// (a `null`'s placeholder, a `P2POp`) and turned into a `T` by `from_item`.
pub(crate) fn flatten<T>(
    op_name: &str,
    entry: &JVal,
    leaf: &LeafFn<'_, T>,
    from_item: &dyn Fn(Item) -> T,
) -> (Named<T>, Named<T>) {
    let mut items: Vec<(String, T)> = Vec::new();
    let mut walker = Walker {
        leaf,
        from_item,
        out: &mut items,
    };
    if is_parameters_grad(op_name) {
        walker.walk(op_name, entry, true);
    } else if let JVal::Obj(map) = entry {
        let mut prefix = String::with_capacity(op_name.len() + 12);
        for (key, value) in map {
            let io = match key.as_ref() {
                "input_args" | "input_kwargs" | "input" => "input",
                "output" => "output",
                "parameters" => "parameters",
                _ => continue,
            };
            prefix.clear();
            prefix.push_str(op_name);
            prefix.push('.');
            prefix.push_str(io);
            walker.walk(&prefix, value, false);
        }
    }
    let is_output = |n: &str| n.contains(".output.") && !n.contains(".input.");
    let outputs = items.iter().filter(|(n, _)| is_output(n)).count();
    let mut output = Vec::with_capacity(outputs);
    let mut input = Vec::with_capacity(items.len() - outputs);
    for (name, item) in items {
        if is_output(&name) {
            output.push((name, item));
        } else {
            input.push((name, item));
        }
    }
    (input, output)
}

/// `true` for `…parameters_grad` and `…parameters_grad.N` op names.
pub fn is_parameters_grad(op_name: &str) -> bool {
    let mut segs = op_name.rsplit('.');
    let last = segs.next().unwrap_or("");
    let second = segs.next().unwrap_or("");
    last == "parameters_grad" || second == "parameters_grad"
}

fn child_name(name: &str, part: &str) -> String {
    let mut s = String::with_capacity(name.len() + 1 + part.len());
    s.push_str(name);
    s.push('.');
    s.push_str(part);
    s
}

/// msprobe's recursive flattening of one input/output/parameters value into named leaves.
struct Walker<'w, T> {
    leaf: &'w LeafFn<'w, T>,
    from_item: &'w dyn Fn(Item) -> T,
    out: &'w mut Vec<(String, T)>,
}

impl<T> Walker<'_, T> {
    fn walk(&mut self, name: &str, value: &JVal, grad_state: bool) {
        match value {
            JVal::Null => self
                .out
                .push((name.to_string(), (self.from_item)(placeholder_item()))),
            JVal::Obj(_) if value.get("class_type").and_then(JVal::as_str) == Some(P2P_OP) => {
                let (key, item) = p2p_op_item(name, value);
                self.out.push((key, (self.from_item)(item)));
            }
            JVal::Obj(map) if value.get("type").is_some_and(JVal::is_string) => {
                let item = (self.leaf)(name, map);
                self.out.push((leaf_key(name, map), item));
            }
            JVal::Obj(map) => {
                for (k, v) in map {
                    self.walk(&child_name(name, k), v, grad_state);
                }
            }
            JVal::Arr(_) | JVal::LazyArr(_) => {
                for (i, v) in value.elements().enumerate() {
                    if grad_state {
                        self.walk(name, &v, grad_state);
                    } else {
                        let mut buf = [0u8; 20];
                        self.walk(&child_name(name, itoa_str(&mut buf, i)), &v, grad_state);
                    }
                }
            }
            // A bare scalar where a leaf dict was expected (e.g. the `op` and `peer` of a
            // MindSpore P2POp, which is not read as one leaf): msprobe's `op_item_parse` gives
            // no item for it.
            _ => {}
        }
    }
}

/// The class of a `torch.distributed.P2POp` item (the ops of `batch_isend_irecv`), which msprobe
/// reads as one leaf. MindSpore's P2POps (`mindspore.mint.distributed.P2POp`) are not read so.
const P2P_OP: &str = "torch.distributed.P2POp";

/// msprobe's leaf of a `P2POp` dict: the item of its `tensor` (the placeholder when that is not
/// a dict), then its `class_type`, `op`, `peer`, `tag` and `group_id` (null when absent); with
/// the name it is listed under.
fn p2p_op_item(name: &str, p2p: &JVal) -> (String, Item) {
    let (key, mut item) = match p2p.get("tensor") {
        Some(JVal::Obj(tensor)) => (leaf_key(name, tensor), leaf_item(name, tensor)),
        _ => (name.to_string(), placeholder_item()),
    };
    for field in ["class_type", "op", "peer", "tag", "group_id"] {
        let value = p2p.get(field).map_or(PyVal::None, PyVal::from_jval);
        item.set(field, value);
    }
    (key, item)
}

/// The name a leaf is listed under: its `data_name` without the file extension when it has a
/// real one (not empty, not `-1`), else its position name.
fn leaf_key(name: &str, leaf: &[(Cow<str>, JVal)]) -> String {
    match leaf.iter().find(|(k, _)| k == "data_name").map(|(_, v)| v) {
        Some(JVal::Str(dn)) if !dn.is_empty() && dn != "-1" => dn
            .rsplit_once('.')
            .map_or_else(|| dn.to_string(), |(a, _)| a.to_string()),
        _ => name.to_string(),
    }
}

fn itoa_str(buf: &mut [u8; 20], mut i: usize) -> &str {
    let mut pos = buf.len();
    loop {
        pos -= 1;
        buf[pos] = b'0' + (i % 10) as u8;
        i /= 10;
        if i == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[pos..]).unwrap_or("0")
}

pub(crate) fn placeholder_item() -> Item {
    let mut item = Item {
        fields: Vec::with_capacity(9),
    };
    for key in ["Max", "Min", "Mean", "Norm", "dtype", "shape", "md5"] {
        item.fields.push((Cow::Borrowed(key), PyVal::None));
    }
    item.fields
        .push((Cow::Borrowed("data_name"), PyVal::Str("-1".into())));
    item.fields
        .push((Cow::Borrowed("requires_grad"), PyVal::None));
    item
}

const STAT_KEYS: [&str; 4] = ["Max", "Min", "Mean", "Norm"];

/// A field value of a leaf as msprobe's `gen_op_item` makes it: a value of the dump as it is,
/// or one msprobe computes. Copies are cheap (a reference, or a shared value), so a long value
/// that msprobe repeats in `Max`, `Min`, `Mean`, `Norm` and `value` is not copied five times
/// while the item is made; only an [`Item`] made from it owns copies.
#[derive(Debug, Clone)]
pub(crate) enum LeafVal<'j, 'a> {
    Dump(&'j JVal<'a>),
    Made(std::rc::Rc<PyVal>),
}

impl LeafVal<'_, '_> {
    fn made(v: PyVal) -> Self {
        LeafVal::Made(std::rc::Rc::new(v))
    }

    /// The value as Python holds it.
    pub(crate) fn to_pyval(&self) -> PyVal {
        match self {
            LeafVal::Dump(v) => PyVal::from_jval(v),
            LeafVal::Made(v) => PyVal::clone(v),
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            LeafVal::Dump(v) => v.as_str(),
            LeafVal::Made(v) => v.as_str(),
        }
    }

    /// msprobe's `not value` for the values it tests (`None`, `False`, `0`, `''`).
    fn is_falsy(&self) -> bool {
        match self {
            LeafVal::Dump(v) => match v {
                JVal::Null | JVal::Bool(false) | JVal::Int(0) => true,
                JVal::Str(s) => s.is_empty(),
                _ => false,
            },
            LeafVal::Made(v) => match &**v {
                PyVal::None | PyVal::Bool(false) | PyVal::Int(0) => true,
                PyVal::Str(s) => s.is_empty(),
                _ => false,
            },
        }
    }

    /// Python's class name of the value.
    fn class(&self) -> &'static str {
        match self {
            LeafVal::Dump(v) => match v {
                JVal::Null => "NoneType",
                JVal::Bool(_) => "bool",
                JVal::Int(_) | JVal::BigUint(_) => "int",
                JVal::Float(_) | JVal::NonFinite(_) => "float",
                JVal::Str(_) => "str",
                JVal::Arr(_) | JVal::LazyArr(_) => "list",
                JVal::Obj(_) => "dict",
            },
            LeafVal::Made(v) => match &**v {
                PyVal::None => "NoneType",
                PyVal::Bool(_) => "bool",
                PyVal::Int(_) | PyVal::BigInt(_) => "int",
                PyVal::Float(_) => "float",
                PyVal::Str(_) => "str",
                PyVal::List(_) => "list",
                PyVal::Dict(_) => "dict",
            },
        }
    }

    /// The length of a list (`None` for other values).
    fn list_len(&self) -> Option<usize> {
        match self {
            LeafVal::Dump(v) => v.is_array().then(|| v.array_len()),
            LeafVal::Made(v) => match &**v {
                PyVal::List(l) => Some(l.len()),
                _ => None,
            },
        }
    }

    /// Python's `str()` of the value, written to `out` (no intermediate tree).
    fn write_py_str(&self, out: &mut dyn std::fmt::Write) {
        match self {
            LeafVal::Dump(v) => crate::pyval::write_jval_py_str(out, v),
            LeafVal::Made(v) => {
                let _ = out.write_str(&v.py_str());
            }
        }
    }

    fn py_str(&self) -> String {
        let mut s = String::new();
        self.write_py_str(&mut s);
        s
    }
}

/// A leaf's fields while msprobe's rules are applied.
type LeafFields<'j, 'a> = Vec<(FieldName, LeafVal<'j, 'a>)>;

fn get<'f, 'j, 'a>(fields: &'f LeafFields<'j, 'a>, key: &str) -> Option<&'f LeafVal<'j, 'a>> {
    fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn set<'j, 'a>(fields: &mut LeafFields<'j, 'a>, key: &str, value: LeafVal<'j, 'a>) {
    match fields.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => *v = value,
        None => fields.push((field_name(key), value)),
    }
}

/// msprobe's `gen_op_item` for one leaf dict.
pub(crate) fn leaf_item(name: &str, leaf: &[(Cow<str>, JVal)]) -> Item {
    let fields = leaf_fields(name, leaf)
        .iter()
        .map(|(k, v)| (k.clone(), v.to_pyval()))
        .collect();
    Item { fields }
}

/// The fields of msprobe's `gen_op_item` for one leaf dict, values referring to the dump's
/// where msprobe keeps them as they are.
pub(crate) fn leaf_fields<'j, 'a>(
    name: &str,
    leaf: &'j [(Cow<'a, str>, JVal<'a>)],
) -> LeafFields<'j, 'a> {
    let mut item: LeafFields<'j, 'a> = Vec::with_capacity(leaf.len() + 3);
    for (k, v) in leaf {
        let val = match v {
            JVal::Bool(b) if k == "requires_grad" => {
                LeafVal::made(PyVal::Str(if *b { "True" } else { "False" }.into()))
            }
            other => LeafVal::Dump(other),
        };
        item.push((field_name(k), val));
    }
    if get(&item, "data_name")
        .and_then(LeafVal::as_str)
        .is_none_or(str::is_empty)
    {
        set(
            &mut item,
            "data_name",
            LeafVal::made(PyVal::Str("-1".into())),
        );
    }
    for key in std::iter::once("requires_grad").chain(STAT_KEYS) {
        if get(&item, key).is_none() {
            item.push((field_name(key), LeafVal::made(PyVal::None)));
        }
    }
    // msprobe tests `not op_item.get('dtype')` / `not op_item.get('md5')`: a `null` or empty
    // value counts as absent.
    let falsy = |v: Option<&LeafVal>| v.is_none_or(LeafVal::is_falsy);
    let text = |s: String| LeafVal::made(PyVal::Str(s));
    if falsy(get(&item, "dtype")) {
        let ty = get(&item, "type").map(LeafVal::py_str).unwrap_or_default();
        let value = get(&item, "value")
            .cloned()
            .unwrap_or_else(|| LeafVal::made(PyVal::None));
        if ty == "torch.Size" {
            set(&mut item, "dtype", text(ty.clone()));
            set(&mut item, "shape", text(value.py_str()));
        } else if ty == "slice" {
            let n = value.list_len().unwrap_or(0);
            set(&mut item, "dtype", text(ty.clone()));
            set(&mut item, "shape", text(format!("({n},)")));
        } else if ty == "ellipsis" {
            set(&mut item, "dtype", text(ty.clone()));
            set(&mut item, "shape", text("[]".into()));
            for key in STAT_KEYS {
                set(&mut item, key, value.clone());
            }
        } else if ["src", "dst", "group_src", "group_dst"]
            .iter()
            .any(|s| name.ends_with(s))
        {
            let shown = text(value.py_str());
            set(&mut item, "dtype", text(ty.clone()));
            set(&mut item, "shape", text("[]".into()));
            for key in STAT_KEYS {
                set(&mut item, key, shown.clone());
            }
            set(&mut item, "md5", shown);
        } else if ty == "torch.ProcessGroup" {
            set(&mut item, "dtype", text(ty.clone()));
            set(&mut item, "shape", text("[]".into()));
            let ranks = text(
                get(&item, "group_ranks")
                    .map(LeafVal::py_str)
                    .unwrap_or_else(|| "None".into()),
            );
            for key in STAT_KEYS {
                set(&mut item, key, ranks.clone());
            }
            set(&mut item, "md5", ranks);
        } else {
            set(
                &mut item,
                "dtype",
                text(format!("<class '{}'>", value.class())),
            );
            set(&mut item, "shape", text("[]".into()));
            for key in STAT_KEYS {
                set(&mut item, key, value.clone());
            }
        }
    }
    if falsy(get(&item, "md5")) {
        // The CRC of an absent value is the CRC of the empty string; the text of a long value
        // is hashed as it is written, never held.
        let mut crc = Crc(crc32fast::Hasher::new());
        if let Some(v) = get(&item, "value") {
            v.write_py_str(&mut crc);
        }
        set(&mut item, "md5", text(format!("{:08x}", crc.0.finalize())));
    }
    // Items live as long as the graph: give back the growth slack.
    item.shrink_to_fit();
    item
}

/// A CRC-32 taking text as it is written.
struct Crc(crc32fast::Hasher);

impl std::fmt::Write for Crc {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.update(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_null_md5_is_the_crc_of_the_missing_value() {
        // Found by the differential tests against msprobe (seed 40103): msprobe replaces a falsy md5, so an empty tensor
        // dumped with `"md5": null` has the CRC of '' and differs from a `None` argument.
        let entry = json!({"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32",
            "shape": [0], "Max": null, "Min": null, "Mean": null, "Norm": null, "md5": null}]});
        let d = parse_op("Tensor.add.0.forward", &entry);
        assert_eq!(d.input[0].1.text("md5").unwrap(), "00000000");
    }

    #[test]
    fn flattens_args_kwargs_params_and_outputs() {
        let entry = json!({
            "input_args": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0, "requires_grad": false}, [{"type": "int", "value": 64}]],
            "input_kwargs": {"inplace": {"type": "bool", "value": false}},
            "output": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0, "requires_grad": true}],
            "parameters": {"weight": null}
        });
        let d = parse_op("Functional.f.0.forward", &entry);
        let names: Vec<&str> = d.input.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "Functional.f.0.forward.input.0",
                "Functional.f.0.forward.input.1.0",
                "Functional.f.0.forward.input.inplace",
                "Functional.f.0.forward.parameters.weight"
            ]
        );
        assert_eq!(d.output[0].0, "Functional.f.0.forward.output.0");
        let int_item = &d.input[1].1;
        assert_eq!(int_item.text("dtype").unwrap(), "<class 'int'>");
        assert_eq!(int_item.text("Max").unwrap(), "64");
        assert_eq!(
            int_item.text("md5").unwrap(),
            format!("{:08x}", crc32fast::hash(b"64"))
        );
        let bool_item = &d.input[2].1;
        assert_eq!(bool_item.text("Max").unwrap(), "False");
        assert_eq!(bool_item.text("dtype").unwrap(), "<class 'bool'>");
        assert_eq!(d.input[0].1.text("requires_grad").unwrap(), "False");
        assert_eq!(d.input[0].1.text("md5").unwrap(), "00000000");
    }

    /// A torch `P2POp` (the ops of `batch_isend_irecv`) is one leaf: its tensor's item, then its
    /// own fields; a MindSpore P2POp is walked like any dict, and its bare scalars give nothing.
    #[test]
    fn a_torch_p2p_op_is_one_leaf_and_bare_scalars_give_nothing() {
        let tensor = json!({"type": "torch.Tensor", "dtype": "torch.float32", "shape": [5], "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0, "requires_grad": false});
        let entry = json!({
            "input_args": [[
                {"class_type": "torch.distributed.P2POp", "tensor": tensor, "op": "isend", "peer": 1, "tag": 0, "group_id": "2a3070ce"},
                {"class_type": "mindspore.mint.distributed.P2POp", "tensor": tensor, "op": "irecv", "peer": 2, "tag": 0, "group_id": null}
            ]],
            "input_kwargs": {"flag": 7}
        });
        let d = parse_op("Distributed.batch_isend_irecv.0.forward", &entry);
        let names: Vec<&str> = d.input.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "Distributed.batch_isend_irecv.0.forward.input.0.0",
                "Distributed.batch_isend_irecv.0.forward.input.0.1.tensor",
                "Distributed.batch_isend_irecv.0.forward.input.0.1.group_id",
            ]
        );
        let p2p = &d.input[0].1;
        let keys: Vec<&str> = p2p.fields.iter().map(|(k, _)| k.as_ref()).collect();
        assert_eq!(&keys[..3], ["type", "dtype", "shape"]);
        assert_eq!(
            &keys[keys.len() - 5..],
            ["class_type", "op", "peer", "tag", "group_id"]
        );
        assert_eq!(p2p.text("Max").unwrap(), "1.0");
        assert_eq!(p2p.text("op").unwrap(), "isend");
        assert_eq!(p2p.get("peer"), Some(&PyVal::Int(1)));
        assert!(d.input[2].1.is_placeholder());
    }

    #[test]
    fn parameters_grad_lists_are_not_indexed() {
        let entry = json!({"bias": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [8], "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0, "requires_grad": false}]});
        let d = parse_op("Module.fc.Linear.parameters_grad.0", &entry);
        assert_eq!(d.input[0].0, "Module.fc.Linear.parameters_grad.0.bias");
        assert!(d.output.is_empty());
    }
}

#[cfg(test)]
mod metric_column_tests {
    use super::*;

    #[test]
    fn per_mode_metric_columns_are_compare_columns() {
        // The statistics block is a slice of COMPARE_COLUMNS: it must stay the eight differences.
        assert_eq!(STATISTICS_METRIC_COLUMNS.first(), Some(&"Max diff"));
        assert_eq!(STATISTICS_METRIC_COLUMNS.last(), Some(&"NormRelativeErr"));
        for c in &TENSOR_METRIC_COLUMNS {
            assert!(COMPARE_COLUMNS.contains(c), "{c} is not a compare column");
        }
    }
}

#[cfg(test)]
mod metric_rule_tests {
    use super::*;

    #[test]
    fn every_mode_metric_has_a_rule() {
        for c in STATISTICS_METRIC_COLUMNS
            .iter()
            .chain(&TENSOR_METRIC_COLUMNS)
        {
            assert!(metric_rule(c).is_some(), "{c} has no rule");
        }
        assert!(metric_rule("Result").is_none());
        assert!(metric_rule("my own metric").is_none());
    }

    /// The ‰ ratios (share of elements within tolerance) are perfect at 1.0,
    /// and rounding-sized differences are not errors.
    #[test]
    fn directions_and_thresholds() {
        let ratio = metric_rule("One Thousandth Err Ratio").unwrap();
        assert_eq!(ratio.worse, Worse::Lower);
        assert!(!ratio.is_notable(1.0));
        assert!(ratio.is_notable(0.0));
        let cosine = metric_rule("Cosine").unwrap();
        assert!(!cosine.is_notable(0.999999999999));
        assert!(cosine.is_notable(0.73));
        let mean = metric_rule("Mean diff").unwrap();
        assert_eq!(mean.worse, Worse::Higher);
        assert!(!mean.is_notable(-6.4e-9));
        assert!(mean.is_notable(-0.02));
        assert!(metric_rule("MaxRelativeErr").unwrap().is_notable(0.5));
    }

    #[test]
    fn detail_columns_keep_the_known_order() {
        let cols: Vec<&str> = detail_columns().collect();
        assert_eq!(cols.first(), Some(&"type"));
        assert!(!cols.contains(&"data_name") && !cols.contains(&"value"));
        let pos = |c: &str| cols.iter().position(|x| *x == c).unwrap();
        assert!(pos("Norm") < pos("Max diff") && pos("Five Thousandths Err Ratio") < pos("Result"));
        assert_eq!(cols.last(), Some(&"dst"));
    }
}
