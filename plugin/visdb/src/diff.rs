//! Node-by-node comparison of two `.vis.db` files: the converter's acceptance tool.
//!
//! Two files are equal when they hold the same rows keyed by `(data_source, step, rank,
//! node_name)` with the same value in every `tb_nodes` column, the same stack text behind each
//! `stack_id`, and the same `tb_config` row. Node data (`input_data`, `output_data`) is compared
//! field by field, numbers (including `"12.5%"` strings) to a relative tolerance, because two
//! correct implementations may differ in the last bits of a float's printed form; everything
//! else must be identical. JSON columns are compared as JSON (key order ignored).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

use crate::json::parse_lenient;
use crate::schema::NODE_COLUMNS;

/// Errors opening or reading a file to compare.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {path}: {source}")]
pub struct DiffError {
    pub path: PathBuf,
    #[source]
    pub source: rusqlite::Error,
}

/// Options of a comparison.
#[derive(Debug, Clone, Copy)]
pub struct DiffOptions {
    /// Relative tolerance for numbers inside node data.
    pub rel_tol: f64,
    /// Stop collecting after this many differences.
    pub max_differences: usize,
    /// `tb_nodes` columns not compared (e.g. `dump_data_dir`, an absolute path of the machine
    /// that made the file).
    pub ignore_columns: &'static [&'static str],
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            rel_tol: 1e-6,
            max_differences: 200,
            ignore_columns: &[],
        }
    }
}

/// The outcome of a comparison.
#[derive(Debug, Clone, Default)]
pub struct DiffReport {
    pub rows_left: usize,
    pub rows_right: usize,
    /// One line per difference (capped by `max_differences`).
    pub differences: Vec<String>,
    /// Total number of differences found (may exceed `differences.len()`).
    pub total: usize,
}

impl DiffReport {
    pub fn is_equal(&self) -> bool {
        self.total == 0
    }

    fn push(&mut self, max: usize, line: String) {
        self.total += 1;
        if self.differences.len() < max {
            self.differences.push(line);
        }
    }
}

type Key = (String, i64, i64, String);
type Row = Vec<rusqlite::types::Value>;

struct Db {
    nodes: BTreeMap<Key, Row>,
    stacks: BTreeMap<String, String>,
    config: Vec<(String, rusqlite::types::Value)>,
}

fn load(path: &Path) -> Result<Db, DiffError> {
    let err = |source| DiffError {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(err)?;
    let cols = NODE_COLUMNS.join(", ");
    let mut stmt = conn
        .prepare(&format!("SELECT {cols} FROM tb_nodes"))
        .map_err(err)?;
    let mut nodes = BTreeMap::new();
    let mut rows = stmt.query([]).map_err(err)?;
    while let Some(r) = rows.next().map_err(err)? {
        let mut row: Row = Vec::with_capacity(NODE_COLUMNS.len());
        for i in 0..NODE_COLUMNS.len() {
            row.push(r.get(i).map_err(err)?);
        }
        let text = |i: usize| match &row[i] {
            rusqlite::types::Value::Text(s) => s.clone(),
            other => format!("{other:?}"),
        };
        let int = |i: usize| match &row[i] {
            rusqlite::types::Value::Integer(n) => *n,
            _ => -1,
        };
        let key = (text(17), int(19), int(20), text(3));
        nodes.insert(key, row);
    }
    let mut stacks = BTreeMap::new();
    let mut stmt = conn
        .prepare("SELECT id, stack_info FROM tb_stack")
        .map_err(err)?;
    let mut rows = stmt.query([]).map_err(err)?;
    while let Some(r) = rows.next().map_err(err)? {
        let id: String = r.get(0).map_err(err)?;
        let info: Option<String> = r.get(1).map_err(err)?;
        stacks.insert(id, info.unwrap_or_default());
    }
    let mut config = Vec::new();
    let mut stmt = conn.prepare("SELECT * FROM tb_config").map_err(err)?;
    let names: Vec<String> = stmt.column_names().map(|s| s.to_string()).collect();
    let mut rows = stmt.query([]).map_err(err)?;
    if let Some(r) = rows.next().map_err(err)? {
        for (i, n) in names.iter().enumerate() {
            config.push((n.clone(), r.get(i).map_err(err)?));
        }
    }
    Ok(Db {
        nodes,
        stacks,
        config,
    })
}

/// Compares two `.vis.db` files.
pub fn diff_files(left: &Path, right: &Path, opts: DiffOptions) -> Result<DiffReport, DiffError> {
    let a = load(left)?;
    let b = load(right)?;
    let mut report = DiffReport {
        rows_left: a.nodes.len(),
        rows_right: b.nodes.len(),
        ..Default::default()
    };
    let max = opts.max_differences;
    for (key, ra) in &a.nodes {
        let label = format!("[{} step {} rank {}] {}", key.0, key.1, key.2, key.3);
        let Some(rb) = b.nodes.get(key) else {
            report.push(max, format!("{label}: only in left"));
            continue;
        };
        for (i, col) in NODE_COLUMNS.iter().enumerate() {
            if opts.ignore_columns.contains(col) {
                continue;
            }
            let (va, vb) = (&ra[i], &rb[i]);
            let same = match *col {
                "id" | "graph_id" => true, // derived from the key
                "stack_id" => {
                    let sa = stack_text(&a.stacks, va);
                    let sb = stack_text(&b.stacks, vb);
                    if sa != sb {
                        report.push(
                            max,
                            format!("{label}: stack differs:\n  left:  {sa}\n  right: {sb}"),
                        );
                    }
                    true
                }
                "input_data" | "output_data" => {
                    let mut notes = Vec::new();
                    compare_json_text(va, vb, opts.rel_tol, &mut notes);
                    for n in notes {
                        report.push(max, format!("{label}: {col}{n}"));
                    }
                    true
                }
                "up_node"
                | "sub_nodes"
                | "matched_node_link"
                | "matched_distributed"
                | "parallel_merge_info" => json_equal(va, vb),
                "precision_index" => numbers_equal(va, vb),
                _ => values_equal(va, vb),
            };
            if !same {
                report.push(
                    max,
                    format!("{label}: {col}: left {} / right {}", show(va), show(vb)),
                );
            }
        }
    }
    for key in b.nodes.keys() {
        if !a.nodes.contains_key(key) {
            report.push(
                max,
                format!(
                    "[{} step {} rank {}] {}: only in right",
                    key.0, key.1, key.2, key.3
                ),
            );
        }
    }
    for ((name, va), (_, vb)) in a.config.iter().zip(&b.config) {
        let same = match name.as_str() {
            "tool_tip" | "node_colors" | "rank_list" | "step_list" => json_equal(va, vb),
            _ => values_equal(va, vb),
        };
        if !same {
            report.push(
                max,
                format!("tb_config.{name}: left {} / right {}", show(va), show(vb)),
            );
        }
    }
    if a.config.len() != b.config.len() {
        report.push(max, "tb_config: row missing on one side".into());
    }
    Ok(report)
}

fn show(v: &rusqlite::types::Value) -> String {
    use rusqlite::types::Value as V;
    let s = match v {
        V::Null => "NULL".to_string(),
        V::Integer(i) => i.to_string(),
        V::Real(f) => f.to_string(),
        V::Text(t) => format!("{t:?}"),
        V::Blob(b) => format!("<{} bytes>", b.len()),
    };
    if s.len() > 300 {
        let cut = (0..=300)
            .rev()
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(0);
        format!("{}…", &s[..cut])
    } else {
        s
    }
}

fn stack_text(stacks: &BTreeMap<String, String>, id: &rusqlite::types::Value) -> String {
    match id {
        rusqlite::types::Value::Text(id) => stacks
            .get(id)
            .cloned()
            .unwrap_or_else(|| format!("<missing stack {id}>")),
        _ => String::new(),
    }
}

fn values_equal(a: &rusqlite::types::Value, b: &rusqlite::types::Value) -> bool {
    a == b || numbers_equal(a, b)
}

fn numbers_equal(a: &rusqlite::types::Value, b: &rusqlite::types::Value) -> bool {
    use rusqlite::types::Value as V;
    let num = |v: &V| match v {
        V::Integer(i) => Some(*i as f64),
        V::Real(f) => Some(*f),
        _ => None,
    };
    match (num(a), num(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

fn as_json(v: &rusqlite::types::Value) -> Option<Value> {
    match v {
        rusqlite::types::Value::Text(t) => parse_lenient(t).ok().flatten(),
        _ => None,
    }
}

fn json_equal(a: &rusqlite::types::Value, b: &rusqlite::types::Value) -> bool {
    if a == b {
        return true;
    }
    match (as_json(a), as_json(b)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

fn compare_json_text(
    a: &rusqlite::types::Value,
    b: &rusqlite::types::Value,
    tol: f64,
    notes: &mut Vec<String>,
) {
    if a == b {
        return;
    }
    match (as_json(a), as_json(b)) {
        (Some(x), Some(y)) => compare_json(&x, &y, tol, "", notes),
        _ => notes.push(format!(": left {} / right {}", show(a), show(b))),
    }
}

/// A number in node data: JSON numbers and strings such as `"1.5"`, `"-3e-06"`, `"12.5%"`.
fn numeric(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            let t = s.trim_end_matches('%');
            if t.is_empty() || t.len() != s.len() && s.len() - t.len() > 1 {
                return None;
            }
            let f: f64 = t.parse().ok()?;
            f.is_finite().then_some(f)
        }
        _ => None,
    }
}

fn close(x: f64, y: f64, tol: f64) -> bool {
    x == y || (x - y).abs() <= tol * x.abs().max(y.abs())
}

/// Structural comparison with numeric tolerance; `path` names the field in messages.
pub fn compare_json(a: &Value, b: &Value, tol: f64, path: &str, notes: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(ma), Value::Object(mb)) => {
            for (k, va) in ma {
                let p = format!("{path}.{k}");
                match mb.get(k) {
                    Some(vb) => compare_json(va, vb, tol, &p, notes),
                    None => notes.push(format!("{p}: only in left")),
                }
            }
            for k in mb.keys() {
                if !ma.contains_key(k) {
                    notes.push(format!("{path}.{k}: only in right"));
                }
            }
        }
        (Value::Array(la), Value::Array(lb)) if la.len() == lb.len() => {
            for (i, (va, vb)) in la.iter().zip(lb).enumerate() {
                compare_json(va, vb, tol, &format!("{path}[{i}]"), notes);
            }
        }
        _ => {
            if a == b {
                return;
            }
            let pct_a = matches!(a, Value::String(s) if s.ends_with('%'));
            let pct_b = matches!(b, Value::String(s) if s.ends_with('%'));
            if pct_a == pct_b {
                if let (Some(x), Some(y)) = (numeric(a), numeric(b)) {
                    if close(x, y, tol) {
                        return;
                    }
                }
            }
            notes.push(format!(": {path}: left {a} / right {b}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_within_tolerance_are_equal() {
        let mut notes = Vec::new();
        compare_json(
            &json!({"a": {"Max": "1.0000000001", "R": "0.072280%"}}),
            &json!({"a": {"Max": "1.0", "R": "0.0722800001%"}}),
            1e-6,
            "",
            &mut notes,
        );
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn real_differences_are_reported() {
        let mut notes = Vec::new();
        compare_json(
            &json!({"a": {"Max": "1.1", "dtype": "torch.float32", "x": "1"}}),
            &json!({"a": {"Max": "1.0", "dtype": "torch.float16"}, "b": {}}),
            1e-6,
            "",
            &mut notes,
        );
        assert_eq!(notes.len(), 4, "{notes:?}");
        let mut notes = Vec::new();
        compare_json(&json!("1.0%"), &json!("1.0"), 1e-6, "", &mut notes);
        assert_eq!(notes.len(), 1);
    }

    fn make_db(path: &Path, max: &str, stack: &str) {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(crate::schema::CREATE_TABLES).unwrap();
        conn.execute(
            "INSERT INTO tb_nodes VALUES ('NPU_0_0_a','NPU_0_0',0,'a','0','','',1,NULL,0,'[]','NPU_0_0_0','','{}',0,?1,'{}','NPU','',0,0,0)",
            [format!("{{\"a.input.0\": {{\"Max\": \"{max}\"}}}}")],
        )
        .unwrap();
        conn.execute("INSERT INTO tb_stack VALUES ('NPU_0_0_0', ?1)", [stack])
            .unwrap();
        conn.execute(
            "INSERT INTO tb_config VALUES ('1','build','',NULL,1,0,'null','[0]','[0]')",
            [],
        )
        .unwrap();
    }

    #[test]
    fn files_compare_node_by_node() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a.db"),
            dir.path().join("b.db"),
            dir.path().join("c.db"),
        );
        make_db(&a, "1.5", "[\"x\"]");
        make_db(&b, "1.5000000001", "[\"x\"]");
        make_db(&c, "2.5", "[\"y\"]");
        let r = diff_files(&a, &b, DiffOptions::default()).unwrap();
        assert!(r.is_equal(), "{:?}", r.differences);
        let r = diff_files(&a, &c, DiffOptions::default()).unwrap();
        assert_eq!(r.total, 2, "{:?}", r.differences);
    }
}
