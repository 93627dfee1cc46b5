//! Fixture helpers: the real msprobe outputs in `tests/fixtures/upstream_vis`, unpacked.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use graph_ascend_diagnose::{diagnose, CompareFile, Diagnosis, Options};
use graph_ascend_testkit::graph_copies::{copy_nodes, number_list, Graphs};

/// `tests/fixtures` of the repository.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// Decompresses upstream case `case`'s `.vis.db` into `dir`.
pub fn unpack(case: &str, dir: &Path) -> PathBuf {
    let case_dir = fixtures().join("upstream_vis").join(case);
    let xz = std::fs::read_dir(&case_dir)
        .unwrap_or_else(|e| panic!("{}: {e}", case_dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".vis.db.xz"))
        .unwrap_or_else(|| panic!("no .vis.db.xz for {case}"));
    let out_path = dir.join(format!("{case}.vis.db"));
    let mut input = std::io::BufReader::new(std::fs::File::open(&xz).expect("open xz"));
    let mut out = std::fs::File::create(&out_path).expect("create");
    lzma_rs::xz_decompress(&mut input, &mut out).expect("decompress");
    out_path
}

/// The diagnosis of an upstream case with default options.
pub fn diagnose_case(case: &str) -> Diagnosis {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = unpack(case, dir.path());
    let file = CompareFile::open(&path).expect("open");
    diagnose(&file, &Options::default()).expect("diagnose")
}

/// Whether source `k` is `node` or has it among its enclosing modules.
pub fn source_covers(d: &Diagnosis, k: usize, node: &str) -> bool {
    d.sources
        .get(k)
        .is_some_and(|s| s.node == node || s.enclosing.iter().any(|e| e == node))
}

/// The sources, printed for failure messages.
pub fn listing(d: &Diagnosis) -> String {
    graph_ascend_diagnose::report::text(d, 50)
}

/// Makes the golden rows of a rank copies of the target rows (so they agree exactly).
pub fn golden_equals_target(db: &rusqlite::Connection, rank: i64) {
    db.execute(
        "UPDATE tb_nodes AS b SET input_data = n.input_data, output_data = n.output_data \
         FROM tb_nodes AS n WHERE b.data_source = 'Bench' AND n.data_source = 'NPU' \
         AND b.step = n.step AND b.rank = n.rank AND b.node_name = n.node_name AND b.rank = ?1",
        [rank],
    )
    .expect("copy rows");
}

/// Sets statistic `stat` of entry `entry` (its key ends so: `input.1`, `output.0`,
/// `parameters.weight`) of `node` on `side` (`NPU`, `Bench`), in every rank of steps `from_step`
/// on, to `f(old)`.
pub fn edit_stat(
    db: &rusqlite::Connection,
    from_step: i64,
    side: &str,
    node: &str,
    entry: &str,
    stat: &str,
    f: impl Fn(f64) -> String,
) {
    let column = if entry.starts_with("output") {
        "output_data"
    } else {
        "input_data"
    };
    let rows: Vec<(String, String)> = db
        .prepare(&format!(
            "SELECT id, {column} FROM tb_nodes WHERE data_source=?1 AND node_name=?2 AND step>=?3"
        ))
        .expect("prepare")
        .query_map(rusqlite::params![side, node, from_step], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert!(!rows.is_empty(), "no {side} row {node}");
    for (id, text) in rows {
        let mut v: serde_json::Value = serde_json::from_str(&text).expect("json");
        let e = v
            .as_object_mut()
            .and_then(|m| {
                m.iter_mut()
                    .find(|(k, _)| k.ends_with(entry))
                    .map(|(_, e)| e)
            })
            .unwrap_or_else(|| panic!("{node} has no {entry}"));
        let old: f64 = e[stat]
            .as_str()
            .and_then(|s| s.parse().ok())
            .expect("a number");
        e[stat] = serde_json::Value::String(f(old));
        db.execute(
            &format!("UPDATE tb_nodes SET {column}=?1 WHERE id=?2"),
            rusqlite::params![v.to_string(), id],
        )
        .expect("update");
    }
}

/// Copies step 0, rank 0 to every step of `steps` and rank of `ranks` (ids made unique).
pub fn replicate(db: &rusqlite::Connection, steps: i64, ranks: i64) {
    let first = Graphs {
        step: Some(0),
        rank: Some(0),
    };
    for step in 0..steps {
        for rank in 0..ranks {
            if (step, rank) == (0, 0) {
                continue;
            }
            let to = Graphs {
                step: Some(step),
                rank: Some(rank),
            };
            copy_nodes(db, first, to, &format!("_{step}_{rank}")).expect("replicate");
        }
    }
    db.execute(
        "UPDATE tb_config SET rank_list = ?1, step_list = ?2",
        [number_list(ranks), number_list(steps)],
    )
    .expect("config");
}
