//! `graph-ascend diagnose --map`: every cell of the JSON map equals a computation made here from
//! the file's rows (the statistics of `tb_nodes`, the hierarchy of `up_node`), independent of the
//! engine's code; the sources marked are those `diagnose --format json` lists.

use std::collections::HashMap;
use std::path::Path;

use graph_ascend_testkit::graph_copies;
use rusqlite::Connection;
use serde_json::Value;

mod common;
use common::{convert_48_layer_pair, ga, unpack};

fn json_of(args: &[&str]) -> Value {
    let o = ga(args);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON")
}

/// A stored statistic as a number (`None`: absent or not a number).
fn stat(entry: &Value, key: &str) -> Option<f64> {
    match entry.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.trim() {
            "inf" | "Infinity" => Some(f64::INFINITY),
            "-inf" | "-Infinity" => Some(f64::NEG_INFINITY),
            "nan" | "NaN" => Some(f64::NAN),
            t => t.parse().ok(),
        },
        _ => None,
    }
}

/// docs/diagnosis.md §1, written out again: the worst of |ΔNorm|/|Norm golden| and |ΔMax|,
/// |ΔMin|, |ΔMean| over the scale max(|Max|, |Min|) of both sides.
fn entry_err(t: &Value, g: &Value) -> Option<f64> {
    let keys = ["Norm", "Max", "Min", "Mean"];
    let scale = ["Max", "Min"]
        .iter()
        .flat_map(|k| [stat(t, k), stat(g, k)])
        .flatten()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let mut worst: Option<f64> = None;
    for k in keys {
        let (Some(x), Some(y)) = (stat(t, k), stat(g, k)) else {
            continue;
        };
        let err = if !x.is_finite() || !y.is_finite() {
            if (x.is_nan() && y.is_nan()) || x == y {
                0.0
            } else {
                return Some(f64::INFINITY);
            }
        } else {
            let d = (x - y).abs();
            let base = if k == "Norm" { y.abs() } else { scale };
            if d == 0.0 {
                0.0
            } else if base > 0.0 {
                d / base
            } else {
                f64::INFINITY
            }
        };
        worst = Some(worst.map_or(err, |w: f64| w.max(err)));
    }
    worst
}

/// The jump tolerance of an entry's dtype (the fixtures are float32; integers are exact).
fn jump(t: &Value) -> f64 {
    let dtype = t.get("dtype").and_then(Value::as_str).unwrap_or("");
    if dtype.contains("int") || dtype.contains("bool") {
        0.0
    } else {
        assert!(dtype.contains("float32"), "a float32 fixture: {dtype}");
        1e-2
    }
}

/// A node's output error over its tolerance: the worst output entry by that ratio.
fn node_ratio(t_out: &Value, g_out: &Value) -> Option<(f64, f64)> {
    let outputs = |v: &Value| -> HashMap<String, Value> {
        v.as_object()
            .map(|o| {
                o.iter()
                    .filter_map(|(k, e)| {
                        let i = k.find(".output.")?;
                        let is_tensor =
                            e.get("type").and_then(Value::as_str) == Some("torch.Tensor");
                        is_tensor.then(|| (k[i..].to_owned(), e.clone()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let (t, g) = (outputs(t_out), outputs(g_out));
    let mut worst: Option<(f64, f64)> = None;
    for (k, te) in &t {
        let Some(ge) = g.get(k) else { continue };
        if te.get("shape") != ge.get("shape") {
            continue;
        }
        let Some(err) = entry_err(te, ge) else {
            continue;
        };
        let tol = jump(te).max(jump(ge));
        let ratio = if err == 0.0 {
            0.0
        } else if tol > 0.0 {
            err / tol
        } else {
            f64::INFINITY
        };
        if worst.is_none_or(|(r, e)| ratio > r || (ratio == r && err > e)) {
            worst = Some((ratio, err));
        }
    }
    worst
}

/// The nodes of one side of one step and rank, by name: (node type, row).
type SideNodes = HashMap<String, (i64, NodeRow)>;

struct NodeRow {
    up: String,
    micro: i64,
    link: Option<String>,
    output: Value,
}

/// The expected cells: (module without call index, step, rank) → (worst ratio or None, sources).
fn expected(
    db: &Path,
    sources: &[(i64, i64, String)],
) -> HashMap<(String, i64, i64), (Option<f64>, u32)> {
    let conn = Connection::open(db).expect("open");
    let mut stmt = conn
        .prepare(
            "SELECT step, rank, data_source, node_name, node_type, up_node, micro_step_id, \
             matched_node_link, output_data FROM tb_nodes",
        )
        .expect("prepare");
    let mut sides: HashMap<(i64, i64, String), SideNodes> = HashMap::new();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, Option<String>>(5)?,
                r.get::<_, i64>(6)?,
                r.get::<_, Option<String>>(7)?,
                r.get::<_, Option<String>>(8)?,
            ))
        })
        .expect("query");
    for row in rows {
        let (step, rank, side, name, ty, up, micro, link, out) = row.expect("row");
        let link: Option<String> = link
            .and_then(|l| serde_json::from_str::<Vec<String>>(&l).ok())
            .and_then(|l| l.last().cloned());
        sides.entry((step, rank, side)).or_default().insert(
            name,
            (
                ty.parse().unwrap_or(-1),
                NodeRow {
                    up: up.unwrap_or_default(),
                    micro,
                    link,
                    output: out
                        .and_then(|o| serde_json::from_str(&o).ok())
                        .unwrap_or(Value::Null),
                },
            ),
        );
    }
    let strip = |name: &str| -> String {
        match name.rsplit_once('.') {
            Some((h, t)) if t.bytes().all(|b| b.is_ascii_digit()) && !t.is_empty() => h.into(),
            _ => name.into(),
        }
    };
    let mut cells: HashMap<(String, i64, i64), (Option<f64>, u32)> = HashMap::new();
    for ((step, rank, side), npu) in &sides {
        if side != "NPU" {
            continue;
        }
        let bench = &sides[&(*step, *rank, "Bench".to_string())];
        // Rows at depth 1: the root's module children (and the update's `optimizer`).
        let is_row = |name: &str| {
            npu.get(name).is_some_and(|(ty, n)| {
                *ty == 0 && n.up == "DefaultModel" && !name.contains("parameters_grad")
            })
        };
        for (name, (_, n)) in npu {
            if !is_row(name) {
                continue;
            }
            let ratio = n
                .link
                .as_ref()
                .and_then(|l| bench.get(l))
                .and_then(|(_, b)| node_ratio(&n.output, &b.output))
                .map(|(r, _)| r);
            let _ = n.micro;
            let cell = cells
                .entry((strip(name), *step, *rank))
                .or_insert((None, 0));
            if ratio.unwrap_or(-1.0) > cell.0.unwrap_or(-1.0) {
                cell.0 = ratio;
            }
        }
        for (s_step, s_rank, node) in sources {
            if (s_step, s_rank) != (step, rank) {
                continue;
            }
            let mut at = node.clone();
            while !is_row(&at) {
                at = npu.get(&at).expect("source node").1.up.clone();
            }
            cells.get_mut(&(strip(&at), *step, *rank)).expect("row").1 += 1;
        }
    }
    cells
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Null => None,
        Value::String(s) if s == "Infinity" => Some(f64::INFINITY),
        v => v.as_f64(),
    }
}

fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) if a.is_infinite() || b.is_infinite() => a == b,
        (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12),
        _ => false,
    }
}

/// Checks every cell of `map` against `want`; with aggregated columns, a cell is the worst of
/// its ranks and its sources their sum.
fn check(map: &Value, want: &HashMap<(String, i64, i64), (Option<f64>, u32)>) -> usize {
    let columns = map["columns"].as_array().expect("columns");
    let mut checked = 0;
    for band in map["bands"].as_array().expect("bands") {
        for row in band["rows"].as_array().expect("rows") {
            let module = row["module"].as_str().expect("module");
            for (k, cell) in row["cells"].as_array().expect("cells").iter().enumerate() {
                let col = &columns[k];
                let step = col["step"].as_i64().expect("step");
                let (a, b) = (
                    col["rank_first"].as_i64().expect("rank"),
                    col["rank_last"].as_i64().expect("rank"),
                );
                let held: Vec<&(Option<f64>, u32)> = (a..=b)
                    .filter_map(|r| want.get(&(module.to_string(), step, r)))
                    .collect();
                if held.is_empty() {
                    assert!(cell.is_null(), "{module} column {k}: {cell}");
                    continue;
                }
                let worst = held
                    .iter()
                    .map(|c| c.0)
                    .fold(None, |m: Option<f64>, r| match (m, r) {
                        (Some(m), Some(r)) => Some(m.max(r)),
                        (m, r) => m.or(r),
                    });
                let sources: u32 = held.iter().map(|c| c.1).sum();
                assert!(
                    close(number(&cell["ratio"]), worst),
                    "{module} step {step} ranks {a}-{b}: map {} against {worst:?}",
                    cell["ratio"]
                );
                assert_eq!(
                    cell["sources"], sources,
                    "{module} step {step} ranks {a}-{b}"
                );
                assert_eq!(cell["step"], step);
                let rank = cell["rank"].as_i64().expect("rank");
                assert!((a..=b).contains(&rank));
                let node = cell["node"].as_str().expect("node");
                assert!(node.starts_with(module), "{node} opens in {module}");
                checked += 1;
            }
        }
    }
    // Every expected cell has its row in the map.
    let rows: usize = map["bands"]
        .as_array()
        .expect("bands")
        .iter()
        .map(|b| b["rows"].as_array().map_or(0, Vec::len))
        .sum();
    let modules: std::collections::HashSet<&String> = want.keys().map(|k| &k.0).collect();
    assert_eq!(rows, modules.len());
    checked
}

fn sources_of(db: &str, extra: &[&str]) -> Vec<(i64, i64, String)> {
    let mut args = vec!["diagnose", db, "--format", "json", "--top", "100000"];
    args.extend_from_slice(extra);
    let d = json_of(&args);
    d["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .map(|s| {
            (
                s["step"].as_i64().expect("step"),
                s["rank"].as_i64().expect("rank"),
                s["node"].as_str().expect("node").to_string(),
            )
        })
        .collect()
}

#[test]
fn the_map_of_a_multi_step_multi_rank_file_equals_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = unpack("compare_dist_ranks", dir.path());
    {
        let db = Connection::open(&path).expect("open");
        graph_copies::copy_step_zero(&db, 3, false).expect("copy step 0");
        // Step 2 of rank 1 agrees with golden everywhere: the columns differ.
        db.execute(
            "UPDATE tb_nodes AS b SET output_data = n.output_data, input_data = n.input_data \
             FROM tb_nodes AS n WHERE b.data_source = 'Bench' AND n.data_source = 'NPU' \
             AND b.step = 2 AND n.step = 2 AND b.rank = 1 AND n.rank = 1 \
             AND b.node_name = n.node_name",
            [],
        )
        .expect("edit");
    }
    let db = path.to_str().unwrap();
    // The cells are computed here with the dtype table's tolerances (`jump`): the map is asked
    // for with the table alone (tolerances tightened from the file or learned from a reference
    // are the sweep's test, tolerance_sweep.rs).
    let fixed = "--fixed-tolerances";
    let sources = sources_of(db, &[fixed]);
    assert!(!sources.is_empty());
    let want = expected(&path, &sources);

    let map = json_of(&["diagnose", db, "--map", "--format", "json", fixed]);
    assert_eq!(map["depth"], 1);
    assert_eq!(map["depth_rule"], "repeated_blocks");
    assert_eq!(
        map["columns"].as_array().map(Vec::len),
        Some(6),
        "3 steps x 2 ranks"
    );
    assert_eq!(check(&map, &want), want.len());
    // The first source is the head of the list, in its cell.
    let f = &map["first_source"];
    assert_eq!(f["node"], sources[0].2.as_str());
    let cell = &map["bands"][f["band"].as_u64().unwrap() as usize]["rows"]
        [f["row"].as_u64().unwrap() as usize]["cells"][f["column"].as_u64().unwrap() as usize];
    assert!(cell["sources"].as_u64().unwrap() > 0, "{cell}");

    // Aggregated: one column per step, the worst rank of each, the sources kept.
    let narrow = json_of(&[
        "diagnose",
        db,
        "--map",
        "--format",
        "json",
        "--max-columns",
        "3",
        fixed,
    ]);
    let columns = narrow["columns"].as_array().unwrap();
    assert_eq!(columns.len(), 3);
    assert!(columns.iter().all(|c| c["width"] == 2));
    check(&narrow, &want);

    // The text grid: one symbol per cell, sources marked.
    let text = ga(&["diagnose", db, "--map", fixed]);
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(out.contains("legend:"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("layers.0") && l.contains('S')),
        "{out}"
    );
    // CSV: one line per held cell.
    let csv = ga(&["diagnose", db, "--map", "--format", "csv", fixed]);
    let lines = String::from_utf8_lossy(&csv.stdout).lines().count();
    assert_eq!(lines, 1 + want.len());
}

/// The real 48-layer pair (8 micro-batches): per micro-batch columns, the two faults' blocks
/// marked in every micro-batch, and the cells equal to the rows.
#[test]
fn the_48_layer_pair_maps_its_faults_in_every_micro_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = convert_48_layer_pair(dir.path());
    let db = path.to_str().unwrap();
    let sources = sources_of(db, &[]);
    let want = expected(&path, &sources);
    let map = json_of(&["diagnose", db, "--map", "--format", "json"]);
    check(&map, &want);
    let micro = json_of(&[
        "diagnose",
        db,
        "--map",
        "--format",
        "json",
        "--map-columns",
        "micro-batches",
    ]);
    assert_eq!(micro["columns"].as_array().map(Vec::len), Some(8));
    let forward = &micro["bands"][0]["rows"];
    for layer in ["layers.1", "layers.2"] {
        let row = forward
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["label"] == layer)
            .expect(layer);
        let marked = row["cells"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["sources"].as_u64().unwrap_or(0) > 0)
            .count();
        assert_eq!(marked, 8, "{layer}: a source in every micro-batch");
    }
}
