//! `--file_type json`: a merged graph written back as a dump folder
//! (`step<S>/rank<R>/{construct,dump,stack}.json`), as msprobe's `GraphJsonExporter` writes it.
//!
//! dump.json holds the main rank's raw entries with the merged statistics laid over them,
//! entries rebuilt from the merged items for nodes the main rank did not dump (other ranks'
//! nodes, renamed layers), `parallel_merge_info` where a node was merged, and `"is_merged": true`.
//! Files are written with Python's `json.dump(indent=2)` layout.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use graph_ascend_dump::pyval::float_repr;
use graph_ascend_dump::{PackedItem, PyVal};
use serde_json::{Map, Value};

use crate::error::ConvertError;
use crate::graph::Graph;

const STATS: [&str; 4] = ["Max", "Min", "Mean", "Norm"];

/// The three files of one merged graph.
pub struct JsonGraph {
    pub construct: String,
    pub dump: String,
    pub stack: String,
}

/// Header fields of the main rank's dump.json.
pub struct DumpHeader<'a> {
    pub task: &'a str,
    pub level: &'a str,
    pub framework: &'a str,
    pub dump_data_dir: Option<&'a str>,
}

/// Builds the three files of a merged graph; `raw`: the main rank's dump.json entries.
pub fn render(g: &Graph, raw: &Map<String, Value>, header: &DumpHeader) -> JsonGraph {
    let order = post_order_unique(g);
    // construct.json
    let construct = PyVal::Dict(
        order
            .iter()
            .filter_map(|&n| {
                g.nodes[n]
                    .parent()
                    .map(|p| (g.id(n).to_string(), PyVal::Str(g.id(p).to_string())))
            })
            .collect(),
    );
    // dump.json
    let mut lookup: HashMap<(&str, &str), &PackedItem> = HashMap::new();
    for (n, node) in g.nodes.iter().enumerate() {
        for (k, it) in node.input().iter().chain(node.output()) {
            lookup.insert((g.id(n), k.as_str()), it);
        }
    }
    let mut data: Vec<(String, PyVal)> = Vec::new();
    for &n in &order {
        let node = &g.nodes[n];
        if n == g.root || (node.input().is_empty() && node.output().is_empty()) {
            continue;
        }
        let entry = match raw.get(g.id(n)) {
            Some(Value::Object(rawn)) => from_raw(rawn, g.id(n), &lookup),
            _ => rebuild(node, g.id(n)),
        };
        let mut entry = strip_md5(entry);
        if !node.parallel_merge_info().is_empty() {
            if let PyVal::Dict(fields) = &mut entry {
                fields.push((
                    "parallel_merge_info".into(),
                    PyVal::List(
                        node.parallel_merge_info()
                            .iter()
                            .map(|s| PyVal::Str(s.clone()))
                            .collect(),
                    ),
                ));
            }
        }
        match data.iter_mut().find(|(k, _)| k == g.id(n)) {
            Some(e) => e.1 = entry,
            None => data.push((g.id(n).to_string(), entry)),
        }
    }
    let dump = PyVal::Dict(vec![
        ("task".into(), PyVal::Str(header.task.into())),
        ("level".into(), PyVal::Str(header.level.into())),
        ("framework".into(), PyVal::Str(header.framework.into())),
        (
            "dump_data_dir".into(),
            header
                .dump_data_dir
                .map_or(PyVal::None, |d| PyVal::Str(d.into())),
        ),
        ("is_merged".into(), PyVal::Bool(true)),
        ("data".into(), PyVal::Dict(data)),
    ]);
    // stack.json: nodes sharing a stack are grouped.
    let mut groups: Vec<(Vec<String>, &Vec<String>)> = Vec::new();
    let mut seen: HashMap<&Vec<String>, usize> = HashMap::new();
    for &n in &order {
        let s: &Vec<String> = &g.nodes[n].stack;
        if s.is_empty() {
            continue;
        }
        match seen.get(s) {
            Some(&i) => groups[i].0.push(g.id(n).to_string()),
            None => {
                seen.insert(s, groups.len());
                groups.push((vec![g.id(n).to_string()], s));
            }
        }
    }
    let stack = PyVal::Dict(
        groups
            .into_iter()
            .enumerate()
            .map(|(i, (ids, frames))| {
                (
                    i.to_string(),
                    PyVal::List(vec![
                        PyVal::List(ids.into_iter().map(PyVal::Str).collect()),
                        PyVal::List(frames.iter().map(|f| PyVal::Str(f.clone())).collect()),
                    ]),
                )
            })
            .collect(),
    );
    JsonGraph {
        construct: dumps(&construct),
        dump: dumps(&dump),
        stack: dumps(&stack),
    }
}

/// Writes the files of one graph into `<out>/step<step>/rank<rank>/` (each through a temporary
/// file and a rename); returns the files written.
pub fn write(
    out: &Path,
    step: i64,
    rank: i64,
    g: &JsonGraph,
) -> Result<Vec<PathBuf>, ConvertError> {
    let dir = out.join(format!("step{step}")).join(format!("rank{rank}"));
    std::fs::create_dir_all(&dir).map_err(|source| ConvertError::Output {
        path: dir.clone(),
        source,
    })?;
    let mut written = Vec::new();
    for (name, text) in [
        ("construct.json", &g.construct),
        ("dump.json", &g.dump),
        ("stack.json", &g.stack),
    ] {
        let dest = dir.join(name);
        let tmp = dir.join(format!(".{name}.tmp"));
        let io = |source| ConvertError::Output {
            path: dest.clone(),
            source,
        };
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, &dest).map_err(io)?;
        written.push(dest);
    }
    Ok(written)
}

/// Nodes in post-order, each id once (msprobe's `get_sorted_nodes`).
fn post_order_unique(g: &Graph) -> Vec<usize> {
    let mut seen = std::collections::HashSet::new();
    g.post_order()
        .into_iter()
        .filter(|&n| seen.insert(g.id(n)))
        .collect()
}

/// A raw entry with the merged statistics laid over its inputs and outputs.
fn from_raw(
    rawn: &Map<String, Value>,
    id: &str,
    lookup: &HashMap<(&str, &str), &PackedItem>,
) -> PyVal {
    let update = |v: &Value, fname: String| -> PyVal {
        let pv = PyVal::from_json(v);
        let PyVal::Dict(mut fields) = pv else {
            return pv;
        };
        if let Some(item) = lookup.get(&(id, fname.as_str())) {
            for stat in STATS {
                if let Some(val) = item.get(stat) {
                    match fields.iter_mut().find(|(k, _)| k == stat) {
                        Some(e) => e.1 = val.to_pyval(),
                        None => fields.push((stat.to_string(), val.to_pyval())),
                    }
                }
            }
        }
        PyVal::Dict(fields)
    };
    let mut out = Vec::with_capacity(rawn.len());
    for (field, v) in rawn {
        let new = match (field.as_str(), v) {
            ("input_args", Value::Array(l)) => PyVal::List(
                l.iter()
                    .enumerate()
                    .map(|(i, x)| update(x, format!("{id}.input.{i}")))
                    .collect(),
            ),
            ("input_kwargs", Value::Object(m)) => PyVal::Dict(
                m.iter()
                    .map(|(k, x)| {
                        let is_leaf = matches!(x, Value::Object(o) if o.contains_key("type"));
                        let val = if is_leaf {
                            update(x, format!("{id}.input.{k}"))
                        } else {
                            PyVal::from_json(x)
                        };
                        (k.clone(), val)
                    })
                    .collect(),
            ),
            ("output", Value::Array(l)) => PyVal::List(
                l.iter()
                    .enumerate()
                    .map(|(i, x)| update(x, format!("{id}.output.{i}")))
                    .collect(),
            ),
            ("parameters", Value::Array(l)) => PyVal::List(
                l.iter()
                    .enumerate()
                    .map(|(i, x)| update(x, format!("{id}.parameters.{i}")))
                    .collect(),
            ),
            _ => PyVal::from_json(v),
        };
        out.push((field.clone(), new));
    }
    PyVal::Dict(out)
}

/// `_reconstruct_node_entry`: an entry rebuilt from a node's items (`id`: the node's id).
fn rebuild(node: &crate::node::Node, id: &str) -> PyVal {
    let mut input_args: Vec<(i64, PyVal)> = Vec::new();
    let mut input_kwargs: Vec<(String, PyVal)> = Vec::new();
    let mut output: Vec<(i64, PyVal)> = Vec::new();
    let mut params: Vec<PyVal> = Vec::new();
    let mut seen_params: Vec<String> = Vec::new();
    let split = |key: &str| -> Option<(String, String)> {
        let suffix = match key.strip_prefix(id) {
            Some(rest) => rest.get(1..).unwrap_or(""),
            None => key,
        };
        let (marker, idx) = suffix.split_once('.')?;
        Some((marker.to_string(), idx.to_string()))
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    for (key, item) in node.input() {
        let Some((marker, idx)) = split(key) else {
            continue;
        };
        if marker == "input" {
            if digits(&idx) {
                let pos: i64 = idx.parse().unwrap_or(0);
                if !input_args.iter().any(|(p, _)| *p == pos) {
                    input_args.push((pos, convert_entry(item)));
                }
            } else if !input_kwargs.iter().any(|(k, _)| *k == idx) {
                input_kwargs.push((idx, convert_entry(item)));
            }
        } else if marker == "parameters" && digits(&idx) && !seen_params.contains(&idx) {
            seen_params.push(idx);
            params.push(convert_entry(item));
        }
    }
    for (key, item) in node.output() {
        let Some((marker, idx)) = split(key) else {
            continue;
        };
        if marker == "output" && digits(&idx) {
            let pos: i64 = idx.parse().unwrap_or(0);
            if !output.iter().any(|(p, _)| *p == pos) {
                output.push((pos, convert_entry(item)));
            }
        }
    }
    let mut out = Vec::new();
    if !input_args.is_empty() {
        input_args.sort_by_key(|(p, _)| *p);
        out.push((
            "input_args".to_string(),
            PyVal::List(input_args.into_iter().map(|(_, v)| v).collect()),
        ));
    }
    if !input_kwargs.is_empty() {
        out.push(("input_kwargs".to_string(), PyVal::Dict(input_kwargs)));
    }
    if !output.is_empty() {
        output.sort_by_key(|(p, _)| *p);
        out.push((
            "output".to_string(),
            PyVal::List(output.into_iter().map(|(_, v)| v).collect()),
        ));
    }
    if !params.is_empty() {
        out.push(("parameters".to_string(), PyVal::List(params)));
    }
    PyVal::Dict(out)
}

/// `_convert_entry`: an item as a dump.json leaf.
fn convert_entry(item: &PackedItem) -> PyVal {
    let item = item.unpack();
    let mut fields: Vec<(String, PyVal)> = Vec::new();
    for (k, v) in &item.fields {
        let k: &str = k;
        match k {
            "data_name" | "full_op_name" | "state" => {}
            "requires_grad" => match v {
                PyVal::None => {}
                PyVal::Str(s) => fields.push((k.to_string(), PyVal::Bool(s == "True"))),
                other => fields.push((k.to_string(), other.clone())),
            },
            "shape" => match v {
                PyVal::Str(s) => {
                    fields.push((k.to_string(), PyVal::List(literal_ints(s.as_str()))))
                }
                other => fields.push((k.to_string(), other.clone())),
            },
            _ => fields.push((k.to_string(), v.clone())),
        }
    }
    // msprobe's items of process groups carry `dtype` (the type) and an empty `shape`; ours
    // leave them out (the `.vis.db` never shows them).
    if item.get("type").and_then(PyVal::as_str) == Some("torch.ProcessGroup") {
        for (k, v) in [
            ("dtype", PyVal::Str("torch.ProcessGroup".into())),
            ("shape", PyVal::List(Vec::new())),
        ] {
            if !fields.iter().any(|(f, _)| f == k) {
                fields.push((k.to_string(), v));
            }
        }
    }
    if fields.iter().all(|(_, v)| v.is_none()) {
        return PyVal::None;
    }
    PyVal::Dict(fields)
}

/// `ast.literal_eval` of a shape text (`[2, 3]`, `(4,)`) as a list; `[]` if it is not one.
fn literal_ints(s: &str) -> Vec<PyVal> {
    let t = s.trim();
    let inner = t
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .or_else(|| t.strip_prefix('(').and_then(|r| r.strip_suffix(')')));
    let Some(inner) = inner else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for part in inner.split(',') {
        let p = part.trim();
        if p.is_empty() {
            continue;
        }
        match p.parse::<i64>() {
            Ok(i) => out.push(PyVal::Int(i)),
            Err(_) => return Vec::new(),
        }
    }
    out
}

/// Drops `md5` from every leaf of `input_args`, `input_kwargs`, `output`, `parameters`.
fn strip_md5(entry: PyVal) -> PyVal {
    let PyVal::Dict(fields) = entry else {
        return entry;
    };
    let strip = |v: PyVal| match v {
        PyVal::Dict(f) => PyVal::Dict(f.into_iter().filter(|(k, _)| k != "md5").collect()),
        other => other,
    };
    PyVal::Dict(
        fields
            .into_iter()
            .map(|(k, v)| {
                let v = match (k.as_str(), v) {
                    ("input_args" | "output" | "parameters", PyVal::List(l)) => {
                        PyVal::List(l.into_iter().map(strip).collect())
                    }
                    ("input_kwargs", PyVal::Dict(m)) => {
                        PyVal::Dict(m.into_iter().map(|(a, b)| (a, strip(b))).collect())
                    }
                    (_, v) => v,
                };
                (k, v)
            })
            .collect(),
    )
}

/// Python's `json.dumps(v, indent=2)`.
pub fn dumps(v: &PyVal) -> String {
    let mut out = String::new();
    write_value(&mut out, v, 0);
    out
}

fn indent(out: &mut String, level: usize) {
    out.push('\n');
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn write_value(out: &mut String, v: &PyVal, level: usize) {
    match v {
        PyVal::None => out.push_str("null"),
        PyVal::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        PyVal::Int(i) => out.push_str(&i.to_string()),
        PyVal::BigInt(s) => out.push_str(s),
        PyVal::Float(f) => {
            if f.is_nan() {
                out.push_str("NaN");
            } else if f.is_infinite() {
                out.push_str(if *f > 0.0 { "Infinity" } else { "-Infinity" });
            } else {
                out.push_str(&float_repr(*f));
            }
        }
        PyVal::Str(s) => crate::pyjson::push_str(out, s),
        PyVal::List(l) => {
            if l.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, x) in l.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(out, level + 1);
                write_value(out, x, level + 1);
            }
            indent(out, level);
            out.push(']');
        }
        PyVal::Dict(m) => {
            if m.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(out, level + 1);
                crate::pyjson::push_str(out, k);
                out.push_str(": ");
                write_value(out, x, level + 1);
            }
            indent(out, level);
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumps_like_python_indent_2() {
        let v = PyVal::Dict(vec![
            (
                "a".into(),
                PyVal::List(vec![PyVal::Int(1), PyVal::Float(0.5)]),
            ),
            ("b".into(), PyVal::List(vec![])),
            ("c".into(), PyVal::Float(f64::NAN)),
            ("d".into(), PyVal::None),
        ]);
        assert_eq!(
            dumps(&v),
            "{\n  \"a\": [\n    1,\n    0.5\n  ],\n  \"b\": [],\n  \"c\": NaN,\n  \"d\": null\n}"
        );
        assert_eq!(literal_ints("(4,)"), vec![PyVal::Int(4)]);
        assert_eq!(literal_ints("[2, 16]"), vec![PyVal::Int(2), PyVal::Int(16)]);
        assert!(literal_ints("torch.Size([2])").is_empty());
    }
}
