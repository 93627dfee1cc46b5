//! Our own table of what the diagnosis reads (`ga_diagnosis`, `docs/visdb.md` §5): written into
//! every real compare fixture, it gives the same graphs and the same diagnosis as the rows; an
//! edit (ours, one that sets `modified` as msprobe's plugin does, or any other write of the file,
//! which moves its version past the table's stamp) is never read stale; a table that does not
//! match, does not decode, or has a part too big is passed over for the rows.

mod common;

use std::path::{Path, PathBuf};

use common::{fixtures, unpack};
use graph_ascend_diagnose::error::DiagnoseError;
use graph_ascend_diagnose::{diagnose, write_compact_table, CompareFile, Options, RankData};
use graph_ascend_visdb::store::{
    DiagnosisPart, GraphKey, MatchUpdate, Side, MAX_DIAGNOSIS_PART_BYTES,
};
use graph_ascend_visdb::Store;
use rusqlite::Connection;

/// Every compare case among the fixtures that has a file (some record msprobe's refusal).
fn compare_cases() -> Vec<String> {
    let root = fixtures().join("upstream_vis");
    let has_file = |case: &str| {
        std::fs::read_dir(root.join(case)).is_ok_and(|files| {
            files
                .flatten()
                .any(|f| f.file_name().to_string_lossy().ends_with(".vis.db.xz"))
        })
    };
    let mut cases: Vec<String> = std::fs::read_dir(&root)
        .expect("upstream_vis")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("compare_") && has_file(name))
        .collect();
    cases.sort();
    cases
}

/// A graph as the rules see it, printed (NaN statistics print alike, where `==` says they differ).
/// Both sides as text: every node with its name and entries, the root, the partners.
fn shown(d: &RankData) -> String {
    fn nodes(
        g: &graph_ascend_diagnose::load::SideGraph,
    ) -> Vec<graph_ascend_diagnose::load::NodeRef<'_>> {
        g.iter().collect()
    }
    format!(
        "{:?} {:?} {:?} | {:?} {:?} {:?} | {:?}",
        nodes(&d.npu),
        d.npu.root,
        d.npu.torch,
        nodes(&d.bench),
        d.bench.root,
        d.bench.torch,
        d.partners
    )
}

fn table_rows(path: &Path) -> i64 {
    Connection::open(path)
        .expect("sqlite")
        .query_row("SELECT count(*) FROM ga_diagnosis", [], |r| r.get(0))
        .expect("count")
}

/// `case` unpacked into `dir` with our table written into it.
fn with_table(case: &str, dir: &Path) -> PathBuf {
    let path = unpack(case, dir);
    let graphs = write_compact_table(&path).expect("write the table");
    assert!(graphs >= 1, "{case}");
    path
}

#[test]
fn every_compare_fixture_reads_the_same_from_the_table_as_from_the_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = compare_cases();
    assert!(cases.len() >= 20, "{cases:?}");
    for case in &cases {
        let plain = unpack(case, dir.path());
        let copy = dir.path().join(format!("{case}.table.vis.db"));
        std::fs::copy(&plain, &copy).expect("copy");
        let written = write_compact_table(&copy).expect("write the table");
        if let Err(DiagnoseError::StructureOnly { .. }) = CompareFile::open(&plain) {
            // No data to diagnose: no table either.
            assert_eq!(written, 0, "{case}");
            continue;
        }
        let (rows, table) = (
            CompareFile::open(&plain).expect("open"),
            CompareFile::open(&copy).expect("open"),
        );
        assert!(
            !rows.has_compact_table() && table.has_compact_table(),
            "{case}"
        );
        assert!(
            table.store().diagnosis_table_current().expect("stamp"),
            "{case}: the table is read"
        );
        for (step, ranks) in table.graphs_to_visit(None, None).expect("graphs") {
            for rank in ranks {
                let from_rows = table.load_rows(step, rank).expect("rows");
                let from_table = table.load(step, rank).expect("table");
                assert_eq!(
                    shown(&from_table),
                    shown(&from_rows),
                    "{case} {step} {rank}"
                );
            }
        }
        let opts = Options::default();
        assert_eq!(
            diagnose(&table, &opts).expect("diagnose"),
            diagnose(&rows, &opts).expect("diagnose"),
            "{case}"
        );
    }
}

#[test]
fn a_build_file_gets_no_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = unpack("build_tf_stats", dir.path());
    assert_eq!(
        write_compact_table(&path).expect("a build is left alone"),
        0
    );
    let exists: i64 = Connection::open(&path)
        .expect("sqlite")
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name LIKE 'ga_diagnosis%'",
            [],
            |r| r.get(0),
        )
        .expect("schema");
    assert_eq!(exists, 0);
}

/// The output text of `node` on `side` of rank 0, step 0.
fn output_data(path: &Path, side: &str, node: &str) -> String {
    Connection::open(path)
        .expect("sqlite")
        .query_row(
            "SELECT output_data FROM tb_nodes WHERE data_source=?1 AND step=0 AND rank=0 \
             AND node_name=?2",
            [side, node],
            |r| r.get(0),
        )
        .expect("row")
}

/// `text` with every `"Norm": "<x>"` of its entries multiplied by 1000.
fn norms_scaled(text: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(text).expect("json");
    for entry in v.as_object_mut().expect("object").values_mut() {
        if let Some(norm) = entry["Norm"].as_str().and_then(|n| n.parse::<f64>().ok()) {
            entry["Norm"] = serde_json::Value::String((norm * 1000.0).to_string());
        }
    }
    v.to_string()
}

const NODE: &str = "Module.layers.0.mlp.fc1.Linear.forward.0";

#[test]
fn our_match_edit_drops_the_graphs_table_rows_and_the_diagnosis_reads_the_edit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = with_table("compare_tf_stats", dir.path());
    let before = table_rows(&path);
    let stale = CompareFile::open(&path)
        .expect("open")
        .load(0, 0)
        .expect("load");
    // The page's matching writes the node's data anew (here: its outputs' Norms a thousand times
    // larger) and its match, through the store's edit.
    let scaled = norms_scaled(&output_data(&path, "NPU", NODE));
    let store = Store::open_for_edit(&path).expect("open for edit");
    let graph = GraphKey {
        side: Side::Npu,
        step: 0,
        rank: 0,
    };
    let input = Connection::open(&path)
        .expect("sqlite")
        .query_row(
            "SELECT input_data, matched_node_link FROM tb_nodes WHERE data_source='NPU' \
             AND step=0 AND rank=0 AND node_name=?1",
            [NODE],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
        )
        .expect("row");
    store
        .write(|s| {
            s.update_match(&MatchUpdate {
                graph,
                name: NODE.into(),
                matched_node_link: input.1.clone(),
                input_data: input.0.clone(),
                output_data: scaled.clone(),
                precision_index: None,
            })
        })
        .expect("edit");
    drop(store);
    // The graph's rows of our table went with the edit, in its transaction.
    assert!(table_rows(&path) < before);
    let file = CompareFile::open(&path).expect("open");
    let fresh = file.load(0, 0).expect("load");
    assert_eq!(shown(&fresh), shown(&file.load_rows(0, 0).expect("rows")));
    assert_ne!(shown(&fresh), shown(&stale));
}

#[test]
fn a_row_edited_by_another_tool_is_read_from_the_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = with_table("compare_tf_stats", dir.path());
    let rows_before = table_rows(&path);
    // msprobe's plugin edits the row and sets `modified = 1`, and knows nothing of our table.
    let scaled = norms_scaled(&output_data(&path, "NPU", NODE));
    Connection::open(&path)
        .expect("sqlite")
        .execute(
            "UPDATE tb_nodes SET output_data=?1, modified=1 WHERE data_source='NPU' AND step=0 \
             AND rank=0 AND node_name=?2",
            [&scaled, NODE],
        )
        .expect("update");
    assert_eq!(
        table_rows(&path),
        rows_before,
        "the table is left as it was"
    );
    let file = CompareFile::open(&path).expect("open");
    let loaded = file.load(0, 0).expect("load");
    let npu = &loaded.npu;
    let fc1 = npu.find(NODE).expect("the node");
    let norm = npu.outputs(fc1)[0].stats.norm();
    let expected: serde_json::Value = serde_json::from_str(&scaled).expect("json");
    let first = expected
        .as_object()
        .and_then(|m| m.values().next())
        .expect("an output");
    assert_eq!(
        norm,
        first["Norm"].as_str().and_then(|n| n.parse::<f64>().ok())
    );
    assert_eq!(shown(&loaded), shown(&file.load_rows(0, 0).expect("rows")));
}

#[test]
fn a_table_that_does_not_match_the_rows_or_does_not_decode_is_passed_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = with_table("compare_tf_stats", dir.path());
    let db = Connection::open(&path).expect("sqlite");
    let file = CompareFile::open(&path).expect("open");
    let rows = shown(&file.load_rows(0, 0).expect("rows"));
    let cases = [
        (
            "a part cut short",
            "UPDATE ga_diagnosis SET data = substr(data, 1, length(data) - 3) \
             WHERE data_source='Bench' AND part=1",
        ),
        (
            "a part missing",
            "DELETE FROM ga_diagnosis WHERE data_source='NPU' AND part=1",
        ),
        (
            "a part of empty nodes, fewer than it must hold",
            "UPDATE ga_diagnosis SET data = zeroblob(64) WHERE data_source='Bench' AND part=1",
        ),
    ];
    for (what, spoil) in cases {
        let copy = dir.path().join("spoilt.vis.db");
        std::fs::copy(&path, &copy).expect("copy");
        Connection::open(&copy)
            .expect("sqlite")
            .execute_batch(spoil)
            .expect(what);
        // Stamped as current, as a forger would: what passes it over is the decoding.
        forge_stamp(&copy);
        let file = CompareFile::open(&copy).expect("open");
        assert!(file.has_compact_table());
        assert!(file.store().diagnosis_table_current().expect("stamp"));
        assert_eq!(shown(&file.load(0, 0).expect("load")), rows, "{what}");
    }
    // A row more than the table says (stamped as current again after the insert).
    db.execute(
        "INSERT INTO tb_nodes SELECT 'x' || id, graph_id, node_order + 100000, 'x' || node_name, \
         node_type, up_node, sub_nodes, precision_index, overflow_level, micro_step_id, \
         matched_node_link, stack_id, parallel_merge_info, matched_distributed, modified, \
         input_data, output_data, data_source, dump_data_dir, step, rank, is_distributed \
         FROM tb_nodes WHERE data_source='NPU' AND step=0 AND rank=0 AND node_name=?1",
        [NODE],
    )
    .expect("insert");
    drop(db);
    forge_stamp(&path);
    let file = CompareFile::open(&path).expect("open");
    let loaded = file.load(0, 0).expect("load");
    assert!(loaded.npu.find(&format!("x{NODE}")).is_some());
    assert_eq!(shown(&loaded), shown(&file.load_rows(0, 0).expect("rows")));
}

/// The file change counter of `path`'s SQLite header.
fn change_counter(path: &Path) -> u32 {
    let bytes = std::fs::read(path).expect("read");
    u32::from_be_bytes(bytes[24..28].try_into().expect("header"))
}

/// Sets the table's stamp to the version the file has once this write commits, as a forger who
/// knows the form would (the stamp row: step -1, rank -1, data source '', part 0).
fn forge_stamp(path: &Path) {
    let mut stamp = b"gas1".to_vec();
    stamp.extend_from_slice(&(change_counter(path) + 1).to_be_bytes());
    let changed = Connection::open(path)
        .expect("sqlite")
        .execute(
            "UPDATE ga_diagnosis SET data=?1 WHERE step=-1 AND rank=-1 AND data_source='' \
             AND part=0",
            [stamp],
        )
        .expect("stamp");
    assert_eq!(changed, 1, "the stamp row");
}

/// A copy of `path` without our table: what the rows say.
fn rows_only(path: &Path, dir: &Path) -> PathBuf {
    let copy = dir.join("rows_only.vis.db");
    std::fs::copy(path, &copy).expect("copy");
    Connection::open(&copy)
        .expect("sqlite")
        .execute_batch("DROP TABLE ga_diagnosis")
        .expect("drop");
    copy
}

#[test]
fn a_row_edited_in_place_by_another_tool_without_modified_is_read_from_the_rows() {
    // `sqlite3 file "UPDATE tb_nodes SET output_data=…"`: no `modified`, no row more or less.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = with_table("compare_tf_stats", dir.path());
    let file = CompareFile::open(&path).expect("open");
    assert!(file.store().diagnosis_table_current().expect("stamp"));
    let stale = shown(&file.load(0, 0).expect("table"));
    drop(file);
    let scaled = norms_scaled(&output_data(&path, "NPU", NODE));
    Connection::open(&path)
        .expect("sqlite")
        .execute(
            "UPDATE tb_nodes SET output_data=?1 WHERE data_source='NPU' AND step=0 AND rank=0 \
             AND node_name=?2",
            [&scaled, NODE],
        )
        .expect("update");
    let file = CompareFile::open(&path).expect("open");
    assert!(!file.store().diagnosis_table_current().expect("stamp"));
    let loaded = file.load(0, 0).expect("load");
    assert_ne!(shown(&loaded), stale, "the edit is read");
    assert_eq!(shown(&loaded), shown(&file.load_rows(0, 0).expect("rows")));
    // So is a write in WAL mode, whose commits leave the counter alone: switching to WAL moved it.
    let path = with_table("compare_tf_stats", &dir.path().join("wal").tap_mkdir());
    let db = Connection::open(&path).expect("sqlite");
    db.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
        .expect("wal");
    db.execute(
        "UPDATE tb_nodes SET output_data=?1 WHERE data_source='NPU' AND step=0 AND rank=0 \
         AND node_name=?2",
        [&scaled, NODE],
    )
    .expect("update");
    db.query_row("PRAGMA journal_mode=DELETE", [], |r| r.get::<_, String>(0))
        .expect("back to a rollback journal");
    drop(db);
    let file = CompareFile::open(&path).expect("open");
    assert!(!file.store().diagnosis_table_current().expect("stamp"));
    assert_eq!(
        shown(&file.load(0, 0).expect("load")),
        shown(&file.load_rows(0, 0).expect("rows"))
    );
}

/// `std::fs::create_dir_all` in an expression.
trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}

impl TapMkdir for PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).expect("mkdir");
        self
    }
}

#[test]
fn a_crafted_table_with_a_lying_verdict_falls_back_to_the_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = with_table("compare_tf_stats", dir.path());
    let opts = Options::default();
    let truth = diagnose(
        &CompareFile::open(&rows_only(&path, dir.path())).expect("open"),
        &opts,
    )
    .expect("diagnose");
    // The lie: the table of another file whose node's outputs are a thousand times larger,
    // copied in with SQL, as the probe crafted one.
    let liar_dir = dir.path().join("liar").tap_mkdir();
    let liar = unpack("compare_tf_stats", &liar_dir);
    let scaled = norms_scaled(&output_data(&liar, "NPU", NODE));
    Connection::open(&liar)
        .expect("sqlite")
        .execute(
            "UPDATE tb_nodes SET output_data=?1 WHERE data_source='NPU' AND step=0 AND rank=0 \
             AND node_name=?2",
            [&scaled, NODE],
        )
        .expect("update");
    write_compact_table(&liar).expect("the lying table");
    let db = Connection::open(&path).expect("sqlite");
    db.execute("ATTACH ?1 AS liar", [liar.to_string_lossy()])
        .expect("attach");
    db.execute_batch(
        "BEGIN; DELETE FROM ga_diagnosis; \
         INSERT INTO ga_diagnosis SELECT * FROM liar.ga_diagnosis; COMMIT; DETACH liar",
    )
    .expect("craft");
    drop(db);
    let file = CompareFile::open(&path).expect("open");
    assert!(file.has_compact_table());
    assert!(!file.store().diagnosis_table_current().expect("stamp"));
    assert_eq!(
        diagnose(&file, &opts).expect("diagnose"),
        truth,
        "the rows' verdict"
    );
    drop(file);
    // What a stamp cannot do: a forger who also writes the stamp the file's version will have
    // is believed (docs/visdb.md §5, the threat model). The lie is a lie of the verdict.
    forge_stamp(&path);
    let file = CompareFile::open(&path).expect("open");
    assert!(file.store().diagnosis_table_current().expect("stamp"));
    assert_ne!(diagnose(&file, &opts).expect("diagnose"), truth);
}

#[test]
fn an_oversized_part_is_refused_without_being_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = with_table("compare_tf_stats", dir.path());
    Connection::open(&path)
        .expect("sqlite")
        .execute(
            "UPDATE ga_diagnosis SET data = zeroblob(?1) WHERE data_source='NPU' AND part=1",
            [MAX_DIAGNOSIS_PART_BYTES as i64 + 1],
        )
        .expect("oversize");
    forge_stamp(&path);
    let file = CompareFile::open(&path).expect("open");
    assert!(file.store().diagnosis_table_current().expect("stamp"));
    let graph = GraphKey {
        side: Side::Npu,
        step: 0,
        rank: 0,
    };
    let mut seen = Vec::new();
    file.store()
        .scan_diagnosis_parts(graph, |part, data| -> Result<(), DiagnoseError> {
            seen.push((part, matches!(data, DiagnosisPart::TooLarge(n) if n == MAX_DIAGNOSIS_PART_BYTES as u64 + 1)));
            Ok(())
        })
        .expect("scan");
    assert_eq!(seen[1], (1, true), "{seen:?}");
    assert!(seen.iter().filter(|(_, big)| *big).count() == 1);
    assert_eq!(
        shown(&file.load(0, 0).expect("load")),
        shown(&file.load_rows(0, 0).expect("rows"))
    );
}

#[test]
fn our_own_edits_keep_a_current_table_current_and_a_stale_one_stale() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = with_table("compare_tf_stats", dir.path());
    let current = |path: &Path| {
        CompareFile::open(path)
            .expect("open")
            .store()
            .diagnosis_table_current()
            .expect("stamp")
    };
    assert!(current(&path));
    // A colour edit through the store (the page's legend) writes the file, not the graph.
    let store = Store::open_for_edit(&path).expect("open for edit");
    store.write(|s| s.set_node_colors("{}")).expect("colours");
    store
        .write(|s| s.set_node_colors("{}"))
        .expect("colours again");
    drop(store);
    assert!(current(&path), "our edits move the stamp on");
    // Another program's write, then ours: the table stays stale.
    Connection::open(&path)
        .expect("sqlite")
        .execute("UPDATE tb_config SET node_colors = node_colors || ' '", [])
        .expect("touch");
    assert!(!current(&path));
    let store = Store::open_for_edit(&path).expect("open for edit");
    store.write(|s| s.set_node_colors("{}")).expect("colours");
    drop(store);
    assert!(
        !current(&path),
        "a stale table is never made current by our edit"
    );
}
