//! Sharded conversion (`convert --shard I/N`, then `gather`): the gathered file equals the
//! unsharded one node by node (`diff-visdb`) and table by table, communication links across
//! shards included; a killed shard's leftovers are never taken for a part; the error cases.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use graph_ascend_convert::gather::gather;
use graph_ascend_convert::part::part_name;
use graph_ascend_convert::ParallelParams;
use graph_ascend_convert::{convert, convert_shard, ConvertOptions, ShardSpec};
use graph_ascend_testkit::synthetic_dump::{self, DumpShape};
use graph_ascend_visdb::diff::{diff_files, DiffOptions};
use rusqlite::types::Value;
use rusqlite::Connection;

fn dumps() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/dumps")
}

fn shard(opts: &ConvertOptions, index: u32, count: u32) -> PathBuf {
    let s = ShardSpec::new(index, count).unwrap();
    convert_shard(opts, s, &|_| {}, &AtomicBool::new(false)).unwrap()
}

fn all_rows(db: &Path, table: &str) -> Vec<Vec<Value>> {
    let conn = Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare(&format!("SELECT * FROM {table} ORDER BY rowid"))
        .unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The two files hold the same rows: node by node as `diff-visdb` compares them, and every
/// table row for row in the same order.
fn assert_same(unsharded: &Path, gathered: &Path) {
    let report = diff_files(unsharded, gathered, DiffOptions::default()).unwrap();
    assert!(
        report.is_equal() && report.rows_left > 0,
        "{:?}",
        report.differences
    );
    for table in ["tb_nodes", "tb_stack", "tb_config"] {
        assert!(
            all_rows(unsharded, table) == all_rows(gathered, table),
            "{table} differs"
        );
    }
}

/// The rows of our diagnosis table in the file, in order; `None` when it has none.
fn diagnosis_table(db: &Path) -> Option<Vec<Vec<Value>>> {
    let exists: bool = Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE name = 'ga_diagnosis'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    exists.then(|| all_rows(db, "ga_diagnosis"))
}

/// `(linked rows, ranks with a linked row)` of a file.
fn links(db: &Path) -> (i64, i64) {
    Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT count(*), count(DISTINCT rank) FROM tb_nodes WHERE matched_distributed != '{}'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
}

/// Converts `opts` unsharded and as `count` shards, gathers, and checks they are equal;
/// returns the gathered file.
fn sharded_equals_unsharded(opts: &ConvertOptions, count: u32, tmp: &Path) -> PathBuf {
    let mut whole = opts.clone();
    whole.output = tmp.join("whole");
    let unsharded = convert(&whole, &|_| {}).unwrap();
    let mut part_opts = opts.clone();
    part_opts.output = tmp.join(format!("parts{count}"));
    for i in 0..count {
        let p = shard(&part_opts, i, count);
        assert_eq!(
            p.file_name().unwrap().to_str().unwrap(),
            part_name(ShardSpec::new(i, count).unwrap())
        );
    }
    let gathered = gather(
        std::slice::from_ref(&part_opts.output),
        &tmp.join(format!("gathered{count}")),
    )
    .unwrap();
    assert_same(&unsharded, &gathered);
    // The gather writes our diagnosis table as the unsharded conversion does (a compare's, from
    // the same rows); the parts hold none.
    assert!(diagnosis_table(&unsharded) == diagnosis_table(&gathered));
    assert_eq!(
        diagnosis_table(&gathered).is_some_and(|rows| !rows.is_empty()),
        opts.golden.is_some()
    );
    let parts: Vec<PathBuf> = std::fs::read_dir(&part_opts.output)
        .unwrap()
        .flatten()
        .map(|f| f.path())
        .filter(|p| {
            p.to_string_lossy()
                .ends_with(graph_ascend_convert::part::PART_SUFFIX)
        })
        .collect();
    assert_eq!(parts.len(), count as usize);
    for part in parts {
        assert_eq!(diagnosis_table(&part), None);
    }
    // The gathered indexes (merged from the parts', not built again) hold every row, in order.
    let check: String = Connection::open(&gathered)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok", "integrity_check of {}", gathered.display());
    gathered
}

/// The real two-rank msprobe dumps (send/irecv, broadcast, all_reduce, …): rank 0 and rank 1 in
/// different shards, their links made by the gather.
#[test]
fn real_two_rank_compare_sharded_equals_unsharded() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = ConvertOptions {
        target: dumps().join("dist_stats_b"),
        golden: Some(dumps().join("dist_stats_a")),
        ..Default::default()
    };
    let gathered = sharded_equals_unsharded(&opts, 2, tmp.path());
    let (linked, ranks) = links(&gathered);
    assert!(
        linked > 0 && ranks == 2,
        "{linked} linked rows on {ranks} rank(s)"
    );
    // More shards than units: shard 1 of 3 is empty, and still a part.
    sharded_equals_unsharded(&opts, 3, tmp.path());
}

#[test]
fn real_two_rank_build_sharded_equals_unsharded() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = ConvertOptions {
        target: dumps().join("dist_stats_a"),
        ..Default::default()
    };
    sharded_equals_unsharded(&opts, 2, tmp.path());
}

/// 64 synthetic ranks of two steps in 5 uneven shards: the ring of sends and receives crosses
/// every shard boundary.
#[test]
fn synthetic_64_ranks_sharded_equals_unsharded() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let shape = DumpShape {
        ranks: 64,
        steps: 2,
        ..DumpShape::new(18)
    };
    synthetic_dump::write(&a, shape).expect("synthetic dump");
    let perturbed = DumpShape {
        perturb: true,
        ..shape
    };
    synthetic_dump::write(&b, perturbed).expect("synthetic dump");
    let opts = ConvertOptions {
        target: b,
        golden: Some(a),
        ..Default::default()
    };
    let gathered = sharded_equals_unsharded(&opts, 5, tmp.path());
    // Each rank's send, recv and all_reduce are linked, on both sides, in both steps.
    let (linked, ranks) = links(&gathered);
    assert_eq!((linked, ranks), (64 * 3 * 2 * 2, 64));
}

/// A task killed before its part was sealed leaves only a hidden temporary: it is never taken
/// for a part (the shard is reported missing), the shard's re-run removes it and replaces only
/// its own part.
#[test]
fn killed_shard_is_missing_until_rerun() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = ConvertOptions {
        target: dumps().join("dist_stats_b"),
        golden: Some(dumps().join("dist_stats_a")),
        output: tmp.path().join("parts"),
        ..Default::default()
    };
    let part0 = shard(&opts, 0, 2);
    let part1 = shard(&opts, 1, 2);
    // What a task killed mid-way leaves: the rows written, no manifest, under the temporary
    // name of a process that is gone.
    let leftover = opts.output.join(format!(
        ".graph-ascend-part-{}.{}",
        graph_ascend_visdb::stale::dead_owner_tag(),
        part_name(ShardSpec::new(1, 2).unwrap())
    ));
    std::fs::copy(&part1, &leftover).unwrap();
    Connection::open(&leftover)
        .unwrap()
        .execute_batch("DROP TABLE graph_ascend_part")
        .unwrap();
    std::fs::remove_file(&part1).unwrap();
    let out = tmp.path().join("out");
    let err = gather(std::slice::from_ref(&opts.output), &out)
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing parts: shard(s) 1 of 2"), "{err}");
    // Given by name, the leftover is refused as incomplete.
    let err = gather(&[part0.clone(), leftover.clone()], &out)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a complete part"), "{err}");
    assert!(!out.exists() || std::fs::read_dir(&out).unwrap().count() == 0);
    // The re-run of shard 1 cleans the leftover and leaves shard 0's part as it was.
    let before = std::fs::read(&part0).unwrap();
    shard(&opts, 1, 2);
    assert!(!leftover.exists());
    assert_eq!(std::fs::read(&part0).unwrap(), before);
    let gathered = gather(std::slice::from_ref(&opts.output), &out).unwrap();
    let mut whole = opts.clone();
    whole.output = tmp.path().join("whole");
    assert_same(&convert(&whole, &|_| {}).unwrap(), &gathered);
}

#[test]
fn parts_of_different_runs_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let compare = ConvertOptions {
        target: dumps().join("dist_stats_b"),
        golden: Some(dumps().join("dist_stats_a")),
        output: tmp.path().join("compare"),
        ..Default::default()
    };
    let mut overflow = compare.clone();
    overflow.overflow_check = true;
    overflow.output = tmp.path().join("oc");
    let mut other_inputs = compare.clone();
    other_inputs.target = dumps().join("dist_stats_a");
    other_inputs.golden = Some(dumps().join("dist_stats_b"));
    other_inputs.output = tmp.path().join("swapped");
    let c0 = shard(&compare, 0, 2);
    let c1 = shard(&compare, 1, 2);
    let out = tmp.path().join("out");
    let err = |parts: &[PathBuf]| gather(parts, &out).unwrap_err().to_string();
    let e = err(&[c0.clone(), shard(&overflow, 1, 2)]);
    assert!(
        e.contains("different runs or settings") && e.contains("options"),
        "{e}"
    );
    let e = err(&[c0.clone(), shard(&other_inputs, 1, 2)]);
    assert!(e.contains("inputs differ"), "{e}");
    let e = err(&[c0.clone(), shard(&compare, 1, 3)]);
    assert!(e.contains("shard count differ"), "{e}");
    let e = err(&[c0.clone(), c0.clone(), c1.clone()]);
    assert!(e.contains("are both shard 0/2"), "{e}");
    let e = err(&[c1]);
    assert!(e.contains("missing parts: shard(s) 0 of 2"), "{e}");
    let e = err(&[tmp.path().join("nowhere")]);
    assert!(e.contains("no such part"), "{e}");
    // A plain .vis.db is not a part.
    let mut whole = compare.clone();
    whole.output = tmp.path().join("whole");
    let e = err(&[convert(&whole, &|_| {}).unwrap()]);
    assert!(e.contains("no manifest"), "{e}");
    assert!(!out.exists());
}

#[test]
fn shard_index_must_be_below_count() {
    let e = ShardSpec::new(2, 2).unwrap_err().to_string();
    assert!(e.contains("I must be below N"), "{e}");
    // A part is a .vis.db: a merged build written as JSON files has none.
    let opts = ConvertOptions {
        target: dumps().join("dist_stats_a"),
        output: tempfile::tempdir().unwrap().path().join("o"),
        parallel: vec![ParallelParams::new(2, 2, 1)],
        json_output: true,
        ..Default::default()
    };
    let e = convert_shard(
        &opts,
        ShardSpec::new(0, 2).unwrap(),
        &|_| {},
        &AtomicBool::new(false),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("--file_type json"), "{e}");
}

/// A parallel merge is sharded by step (every merge group of a step in one part): the real
/// two-rank dumps (two steps) merged as TP 2, a build in 2 shards and in 3 (one part empty), and
/// a compare.
#[test]
fn real_two_rank_merge_sharded_equals_unsharded() {
    let tmp = tempfile::tempdir().unwrap();
    let build = ConvertOptions {
        target: dumps().join("dist_stats_a"),
        parallel: vec![ParallelParams::new(2, 2, 1)],
        ..Default::default()
    };
    sharded_equals_unsharded(&build, 2, &tmp.path().join("build"));
    sharded_equals_unsharded(&build, 3, &tmp.path().join("build"));
    let compare = ConvertOptions {
        target: dumps().join("dist_stats_b"),
        golden: Some(dumps().join("dist_stats_a")),
        parallel: vec![ParallelParams::new(2, 2, 1); 2],
        ..Default::default()
    };
    sharded_equals_unsharded(&compare, 2, &tmp.path().join("compare"));
    // A merged run's parts and a plain run's do not mix.
    let mut plain = compare.clone();
    plain.parallel = Vec::new();
    plain.output = tmp.path().join("plain");
    let mut merged = compare;
    merged.output = tmp.path().join("merged");
    let e = gather(
        &[shard(&merged, 0, 2), shard(&plain, 1, 2)],
        &tmp.path().join("mixed"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("options differ"), "{e}");
}

/// The synthetic Megatron layouts (`tests/fixtures/merge_synth`), each copied into three steps:
/// TP 2 × PP 2 × DP 2 (two merge groups per step, rank 0's and rank 2's) in 2 and 4 shards, and a
/// compare of two layouts (TP 4 against TP 2 × PP 2) in 2 shards.
#[test]
fn synthetic_merge_groups_sharded_equals_unsharded() {
    let tmp = tempfile::tempdir().unwrap();
    let synth = unpack_merge_synth(&tmp.path().join("synth"));
    let steps = |layout: &str| {
        let dir = tmp.path().join(format!("{layout}_steps"));
        for step in 0..3 {
            copy_dir(
                &synth.join(layout).join("step0"),
                &dir.join(format!("step{step}")),
            );
        }
        dir
    };
    let dp = ConvertOptions {
        target: steps("tp2pp2dp2"),
        parallel: vec![ParallelParams::new(8, 2, 2)],
        ..Default::default()
    };
    let gathered = sharded_equals_unsharded(&dp, 2, &tmp.path().join("dp"));
    // Two merged graphs (data-parallel replicas) in each of the three steps.
    let graphs: i64 = Connection::open(&gathered)
        .unwrap()
        .query_row(
            "SELECT count(DISTINCT step || '/' || rank) FROM tb_nodes",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(graphs, 6);
    sharded_equals_unsharded(&dp, 4, &tmp.path().join("dp"));
    let compare = ConvertOptions {
        target: steps("tp4"),
        golden: Some(steps("tp2pp2")),
        parallel: vec![ParallelParams::new(4, 4, 1), ParallelParams::new(4, 2, 2)],
        ..Default::default()
    };
    sharded_equals_unsharded(&compare, 2, &tmp.path().join("compare"));
}

/// `merge_synth/dumps.json.xz` (each file's path → its text) unpacked into `dir`.
fn unpack_merge_synth(dir: &Path) -> PathBuf {
    let xz = dumps().join("../merge_synth/dumps.json.xz");
    let mut input = std::io::BufReader::new(std::fs::File::open(xz).unwrap());
    let mut bytes = Vec::new();
    lzma_rs::xz_decompress(&mut input, &mut bytes).unwrap();
    let files: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&bytes).unwrap();
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text.as_str().unwrap()).unwrap();
    }
    dir.to_path_buf()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}
