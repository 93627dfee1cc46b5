//! Folder layouts beyond the msprobe fixtures: differing step sets, synthetic dumps.

use std::path::{Path, PathBuf};

use graph_ascend_convert::{convert, ConvertOptions};
use graph_ascend_testkit::synthetic_dump::{self, DumpShape};
use rusqlite::Connection;

fn dumps() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/dumps")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

fn steps_and_sources(db: &Path) -> Vec<(i64, String)> {
    let conn = Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT DISTINCT step, data_source FROM tb_nodes ORDER BY 1, 2")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn compare_uses_the_steps_both_sides_have() {
    let tmp = tempfile::tempdir().unwrap();
    let golden = tmp.path().join("golden");
    // The golden run has only step1 of the two.
    copy_dir(&dumps().join("mlp_stats/step1"), &golden.join("step1"));
    let opts = ConvertOptions {
        target: dumps().join("mlp_stats"),
        golden: Some(golden),
        output: tmp.path().join("out"),
        ..Default::default()
    };
    let db = convert(&opts, &|_| {}).unwrap();
    assert_eq!(
        steps_and_sources(&db),
        [(1, "Bench".to_string()), (1, "NPU".to_string())]
    );
    let conn = Connection::open(&db).unwrap();
    let steps: String = conn
        .query_row("SELECT step_list FROM tb_config", [], |r| r.get(0))
        .unwrap();
    assert_eq!(steps, "[1]");
}

#[test]
fn layouts_must_agree() {
    let opts = ConvertOptions {
        target: dumps().join("mlp_stats"),
        golden: Some(dumps().join("tf_stats_a/step0")),
        output: tempfile::tempdir().unwrap().path().join("out"),
        ..Default::default()
    };
    let err = convert(&opts, &|_| {}).unwrap_err().to_string();
    assert!(err.contains("inconsistent"), "{err}");
}

#[test]
fn synthetic_dumps_convert() {
    let tmp = tempfile::tempdir().unwrap();
    for (side, perturb) in [("a", false), ("b", true)] {
        let shape = DumpShape {
            perturb,
            ..DumpShape::new(900)
        };
        synthetic_dump::write(&tmp.path().join(side), shape).expect("synthetic dump");
    }
    let opts = ConvertOptions {
        target: tmp.path().join("b/step0/rank0"),
        golden: Some(tmp.path().join("a/step0/rank0")),
        output: tmp.path().join("out"),
        ..Default::default()
    };
    let db = convert(&opts, &|_| {}).unwrap();
    let conn = Connection::open(&db).unwrap();
    let (rows, graded): (i64, i64) = conn
        .query_row(
            "SELECT count(*), count(precision_index) FROM tb_nodes WHERE data_source = 'NPU'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    // 100 layers x 9 entries, plus the root; every node with data is matched and graded.
    assert_eq!(rows, 901);
    assert!(graded >= 900, "{graded}");
}
