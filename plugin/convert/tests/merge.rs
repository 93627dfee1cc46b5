//! Parallel merge (`--rank_size --tp --pp [--vpp] [--order]`, `--file_type json`).
//!
//! - msprobe's own outputs for the carried cases (`tests/fixtures/upstream_vis/*merge*`): the
//!   TP and PP builds, the TP compare and the TP build as JSON;
//! - synthetic Megatron-style layouts (`tests/fixtures/merge_synth/`, made by its
//!   `generate.py`): TP 4, TP 2 × PP 2, PP 2 × VPP 2, TP 2 × PP 2 × DP 2, and a compare of two
//!   different layouts, each against what msprobe 26.2 wrote for them, plus the hierarchy the
//!   rules describe (`docs/msprobe-converter.md` §7);
//! - bad parameters and unsuitable dumps, each refused with a message naming the problem and
//!   nothing left in the output folder.

use std::path::{Path, PathBuf};

use graph_ascend_convert::ParallelParams;
use graph_ascend_convert::{convert, ConvertOptions};
use graph_ascend_visdb::diff::{diff_files, DiffOptions};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn unxz(path: &Path) -> Vec<u8> {
    let mut input = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut out = Vec::new();
    lzma_rs::xz_decompress(&mut input, &mut out).unwrap();
    out
}

/// The `.vis.db.xz` of a fixture folder, unpacked into `into`.
fn golden_db(dir: &Path, into: &Path) -> PathBuf {
    let xz = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".vis.db.xz"))
        .unwrap_or_else(|| panic!("no .vis.db.xz in {}", dir.display()));
    let out = into.join("golden.vis.db");
    std::fs::write(&out, unxz(&xz)).unwrap();
    out
}

fn params(rank_size: i64, tp: i64, pp: i64, vpp: i64) -> ParallelParams {
    let mut p = ParallelParams::new(rank_size, tp, pp);
    p.vpp = vpp;
    p
}

fn run_db(
    target: PathBuf,
    golden: Option<PathBuf>,
    parallel: Vec<ParallelParams>,
    expected: &Path,
) {
    let tmp = tempfile::tempdir().unwrap();
    let opts = ConvertOptions {
        target,
        golden,
        output: tmp.path().join("out"),
        parallel,
        ..Default::default()
    };
    let ours = convert(&opts, &|_| {}).unwrap_or_else(|e| panic!("conversion failed: {e}"));
    let check: String = rusqlite::Connection::open(&ours)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok", "integrity_check of {}", ours.display());
    let theirs = golden_db(expected, tmp.path());
    let report = diff_files(&ours, &theirs, DiffOptions::default()).unwrap();
    assert!(
        report.is_equal(),
        "{}: {} difference(s) ({} rows ours, {} rows msprobe):\n{}",
        expected.display(),
        report.total,
        report.rows_left,
        report.rows_right,
        report.differences.join("\n")
    );
}

fn dist(name: &str) -> PathBuf {
    fixtures().join("dumps").join(name).join("step0")
}

fn upstream(case: &str) -> PathBuf {
    fixtures().join("upstream_vis").join(case)
}

#[test]
fn build_dist_merge_tp2() {
    run_db(
        dist("dist_stats_a"),
        None,
        vec![params(2, 2, 1, 1)],
        &upstream("build_dist_merge_tp2"),
    );
}

#[test]
fn build_dist_merge_pp2() {
    run_db(
        dist("dist_stats_a"),
        None,
        vec![params(2, 1, 2, 1)],
        &upstream("build_dist_merge_pp2"),
    );
}

#[test]
fn compare_dist_merge_tp2() {
    run_db(
        dist("dist_stats_b"),
        Some(dist("dist_stats_a")),
        vec![params(2, 2, 1, 1), params(2, 2, 1, 1)],
        &upstream("compare_dist_merge_tp2"),
    );
}

/// Numbers equal to 1e-12 relative; everything else exactly; object keys in the same order.
fn json_equal(a: &serde_json::Value, b: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    use serde_json::Value as V;
    match (a, b) {
        (V::Object(x), V::Object(y)) => {
            let kx: Vec<&String> = x.keys().collect();
            let ky: Vec<&String> = y.keys().collect();
            if kx != ky {
                out.push(format!("{path}: keys {kx:?} vs {ky:?}"));
                return;
            }
            for (k, v) in x {
                json_equal(v, &y[k], &format!("{path}/{k}"), out);
            }
        }
        (V::Array(x), V::Array(y)) => {
            if x.len() != y.len() {
                out.push(format!("{path}: {} vs {} items", x.len(), y.len()));
                return;
            }
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                json_equal(v, w, &format!("{path}[{i}]"), out);
            }
        }
        (V::Number(x), V::Number(y)) => {
            if x.is_f64() != y.is_f64() {
                out.push(format!("{path}: {x} vs {y} (int/float)"));
            }
            let (p, q) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            if p != q && (p - q).abs() > 1e-12 * p.abs().max(q.abs()) {
                out.push(format!("{path}: {x} vs {y}"));
            }
        }
        _ => {
            if a != b {
                out.push(format!("{path}: {a} vs {b}"));
            }
        }
    }
}

/// `--file_type json` output against msprobe's three files (parsed, numbers to 1e-12).
fn check_json(dir: &Path, expected: impl Fn(&str) -> Vec<u8>) {
    for name in ["construct.json", "dump.json", "stack.json"] {
        let ours: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(name)).unwrap()).unwrap();
        let theirs: serde_json::Value = serde_json::from_slice(&expected(name)).unwrap();
        let mut diffs = Vec::new();
        json_equal(&ours, &theirs, name, &mut diffs);
        assert!(
            diffs.is_empty(),
            "{name}: {} difference(s):\n{}",
            diffs.len(),
            diffs[..diffs.len().min(20)].join("\n")
        );
    }
}

#[test]
fn build_dist_merge_tp2_json() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let opts = ConvertOptions {
        target: dist("dist_stats_a"),
        output: out.clone(),
        parallel: vec![params(2, 2, 1, 1)],
        json_output: true,
        ..Default::default()
    };
    let written = convert(&opts, &|_| {}).unwrap();
    assert_eq!(written, out);
    let case = upstream("build_dist_merge_tp2_json").join("step0/rank0");
    check_json(&out.join("step0/rank0"), |name| {
        unxz(&case.join(format!("{name}.xz")))
    });
    // Only the three files, nothing else (no .vis.db, no temporary files).
    let mut names: Vec<String> = std::fs::read_dir(out.join("step0/rank0"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["construct.json", "dump.json", "stack.json"]);
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
}

/// The synthetic dumps, unpacked (`merge_synth/dumps.json.xz` maps each file's path to its text).
fn synth() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let bytes = unxz(&fixtures().join("merge_synth/dumps.json.xz"));
    let files: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&bytes).unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text.as_str().unwrap()).unwrap();
    }
    dir
}

fn synth_case(name: &str) -> PathBuf {
    fixtures().join("merge_synth").join(name)
}

#[test]
fn synthetic_layouts_equal_msprobe() {
    let s = synth();
    let layout = |n: &str| s.path().join(n).join("step0");
    run_db(
        layout("tp4"),
        None,
        vec![params(4, 4, 1, 1)],
        &synth_case("tp4"),
    );
    run_db(
        layout("tp2pp2"),
        None,
        vec![params(4, 2, 2, 1)],
        &synth_case("tp2pp2"),
    );
    run_db(
        layout("pp2vpp2"),
        None,
        vec![params(2, 1, 2, 2)],
        &synth_case("pp2vpp2"),
    );
    run_db(
        layout("tp2pp2dp2"),
        None,
        vec![params(8, 2, 2, 1)],
        &synth_case("tp2pp2dp2"),
    );
    // Two layouts of one model compared.
    run_db(
        layout("tp4"),
        Some(layout("tp2pp2")),
        vec![params(4, 4, 1, 1), params(4, 2, 2, 1)],
        &synth_case("c_tp4_tp2pp2"),
    );
    // The TP×PP merge as JSON.
    let tmp = tempfile::tempdir().unwrap();
    let opts = ConvertOptions {
        target: layout("tp2pp2"),
        output: tmp.path().to_path_buf(),
        parallel: vec![params(4, 2, 2, 1)],
        json_output: true,
        ..Default::default()
    };
    convert(&opts, &|_| {}).unwrap();
    let case = synth_case("tp2pp2_json");
    check_json(&tmp.path().join("step0/rank0"), |name| {
        unxz(&case.join(format!("{name}.xz")))
    });
}

/// `(rank, node_name, up_node, sub_nodes, parallel_merge_info)` of a merged build.
fn merged_rows(target: PathBuf, p: ParallelParams) -> Vec<(i64, String, String, String, String)> {
    let tmp = tempfile::tempdir().unwrap();
    let opts = ConvertOptions {
        target,
        output: tmp.path().join("out"),
        parallel: vec![p],
        ..Default::default()
    };
    let db = convert(&opts, &|_| {}).unwrap();
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn
        .prepare(
            "SELECT rank, node_name, up_node, sub_nodes, parallel_merge_info FROM tb_nodes \
             ORDER BY rank, node_order",
        )
        .unwrap();
    let rows = st
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    rows
}

fn names(rows: &[(i64, String, String, String, String)]) -> Vec<&str> {
    rows.iter().map(|r| r.1.as_str()).collect()
}

/// §7: TP merges the statistics of split tensors into the first rank's node, with notes; the
/// RowParallelLinear matmul takes the all_reduce's output; other ranks' root APIs are kept
/// under `Apis_Between_Modules_All_Ranks` with `_rank<r>` names.
#[test]
fn tp4_hierarchy_follows_the_spec() {
    let s = synth();
    let rows = merged_rows(s.path().join("tp4/step0"), params(4, 4, 1, 1));
    assert!(rows.iter().all(|r| r.0 == 0), "one graph, under rank 0");
    let n = names(&rows);
    assert!(n.contains(&"Apis_Between_Modules_All_Ranks.0"));
    for r in 0..4 {
        assert!(n.contains(&format!("Apis_Between_Modules_Rank{r}.0").as_str()));
    }
    assert!(n.contains(&"Torch.arange_rank3.0.forward"));
    let info = |name: &str| {
        rows.iter()
            .find(|r| r.1 == name)
            .map(|r| r.4.clone())
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    let col =
        info("Module.module.GPTModel.decoder.layers.0.linear_qkv.ColumnParallelLinear.forward.0");
    assert!(
        col.contains("merged from rank [0, 1, 2, 3]")
            && col.contains("The Max value merging method for output.0 is: max("),
        "{col}"
    );
    let matmul = info("Torch.matmul.1.forward");
    assert!(
        matmul.contains(
            "The output of this data is merged from Distributed.all_reduce.0.forward.output.0"
        ),
        "{matmul}"
    );
    // Replicated data is not merged.
    assert_eq!(
        info("Module.module.GPTModel.decoder.TransformerBlock.forward.0"),
        ""
    );
}

/// §7: PP stages' layers, numbered locally on each stage, end up one after the other under the
/// first stage's parent, renumbered; the later stage's APIs are marked `_rank<r>`.
#[test]
fn pp_and_vpp_hierarchy_follows_the_spec() {
    let s = synth();
    let rows = merged_rows(s.path().join("tp2pp2/step0"), params(4, 2, 2, 1));
    let layers = |rows: &[(i64, String, String, String, String)], parent: &str| -> Vec<String> {
        let subs = &rows
            .iter()
            .find(|r| r.1 == parent)
            .unwrap_or_else(|| panic!("{parent}"))
            .3;
        serde_json::from_str::<Vec<String>>(subs).unwrap()
    };
    assert_eq!(
        layers(
            &rows,
            "Module.module.GPTModel.decoder.TransformerBlock.forward.0"
        ),
        (0..4)
            .map(|l| format!(
                "Module.module.GPTModel.decoder.layers.{l}.TransformerLayer.forward.0"
            ))
            .collect::<Vec<_>>()
    );
    // Stage 2 (rank 2) holds the output layer: it moves to the merged graph with its APIs renamed.
    let n = names(&rows);
    assert!(n.contains(&"Module.module.GPTModel.output_layer.ColumnParallelLinear.forward.0"));
    assert!(n.contains(&"Functional.gelu_rank2.0.forward"));
    // VPP: chunk 1 folds into chunk 0; its layers follow chunk 0's in the forward pass.
    let rows = merged_rows(s.path().join("pp2vpp2/step0"), params(2, 1, 2, 2));
    let n = names(&rows);
    assert!(
        !n.contains(&"Module.1.GPTModel.forward.0"),
        "chunk 1 is folded away"
    );
    let fwd = layers(
        &rows,
        "Module.0.GPTModel.decoder.TransformerBlock.forward.0",
    );
    assert_eq!(
        fwd,
        (0..8)
            .map(|l| format!("Module.0.GPTModel.decoder.layers.{l}.TransformerLayer.forward.0"))
            .collect::<Vec<_>>()
    );
}

/// Data parallelism: one merged graph per replica, each under its first rank.
#[test]
fn dp_replicas_give_one_graph_each() {
    let s = synth();
    let rows = merged_rows(s.path().join("tp2pp2dp2/step0"), params(8, 2, 2, 1));
    let mut ranks: Vec<i64> = rows.iter().map(|r| r.0).collect();
    ranks.dedup();
    assert_eq!(ranks, [0, 2]);
}

/// A refused conversion: the message contains `needle`, and nothing is left behind.
fn refused(opts: ConvertOptions, needle: &str) {
    let out = opts.output.clone();
    let err = convert(&opts, &|_| {}).expect_err("must be refused");
    let msg = err.to_string();
    assert!(msg.contains(needle), "message {msg:?} lacks {needle:?}");
    let left = std::fs::read_dir(&out).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "nothing may be left in {}", out.display());
}

fn opts(
    tmp: &Path,
    target: PathBuf,
    golden: Option<PathBuf>,
    p: Vec<ParallelParams>,
) -> ConvertOptions {
    ConvertOptions {
        target,
        golden,
        output: tmp.join("out"),
        parallel: p,
        ..Default::default()
    }
}

/// Copies the single rank folder of `<dump>/step0` as `rank0..rankN-1` of a new step folder.
fn as_ranks(dump: &str, n: usize, into: &Path) -> PathBuf {
    let step = fixtures().join("dumps").join(dump).join("step0");
    let src = std::fs::read_dir(&step)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let dest = into.join(dump).join("step0");
    for r in 0..n {
        let d = dest.join(format!("rank{r}"));
        std::fs::create_dir_all(&d).unwrap();
        for f in ["construct.json", "dump.json", "stack.json"] {
            std::fs::copy(src.join(f), d.join(f)).unwrap();
        }
    }
    dest
}

#[test]
fn bad_parameters_are_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let a = || dist("dist_stats_a");
    refused(
        opts(t, a(), None, vec![params(4, 2, 1, 1)]),
        "--rank_size is 4 but the dump has 2 rank folder(s)",
    );
    let s = synth();
    let tp4 = s.path().join("tp4/step0");
    refused(
        opts(t, tp4.clone(), None, vec![params(4, 3, 1, 1)]),
        "not divisible by --tp 3",
    );
    refused(
        opts(t, tp4.clone(), None, vec![params(4, 4, 4, 1)]),
        "does not divide --rank_size 4",
    );
    refused(
        opts(t, tp4.clone(), None, vec![params(4, 4, 1, 2)]),
        "--vpp 2 needs --pp of at least 2",
    );
    let mut bad_order = params(4, 4, 1, 1);
    bad_order.order = "tp-DP".into();
    refused(
        opts(t, tp4.clone(), None, vec![bad_order]),
        "lowercase letters",
    );
    let mut missing_dim = params(4, 2, 2, 1);
    missing_dim.order = "tp-dp".into();
    refused(
        opts(t, s.path().join("tp2pp2/step0"), None, vec![missing_dim]),
        "pp is 2 but pp is not in the order",
    );
    refused(
        opts(t, a(), Some(a()), vec![params(2, 2, 1, 1)]),
        "a compare needs 2",
    );
    let mut json = opts(
        t,
        a(),
        Some(a()),
        vec![params(2, 2, 1, 1), params(2, 2, 1, 1)],
    );
    json.json_output = true;
    refused(json, "--file_type json is only for a merged build");
    // Different data parallelism on the two sides.
    refused(
        opts(
            t,
            s.path().join("tp2pp2dp2/step0"),
            Some(tp4.clone()),
            vec![params(8, 2, 2, 1), params(4, 4, 1, 1)],
        ),
        "the target merges into 2 data-parallel graph(s) but the golden into 1",
    );
    // A single rank's folder.
    let one = fixtures().join("dumps/dist_stats_a/step0/rank0");
    refused(
        opts(t, one, None, vec![params(1, 1, 1, 1)]),
        "not a single rank's dump",
    );
}

#[test]
fn missing_ranks_and_unsuitable_dumps_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    // rank1 missing: rank0 and rank2 only.
    let s = synth();
    let gap = t.join("gap/step0");
    for (from, to) in [("rank0", "rank0"), ("rank2", "rank2")] {
        let d = gap.join(to);
        std::fs::create_dir_all(&d).unwrap();
        for f in ["construct.json", "dump.json", "stack.json"] {
            std::fs::copy(s.path().join("tp4/step0").join(from).join(f), d.join(f)).unwrap();
        }
    }
    refused(
        opts(t, gap, None, vec![params(2, 2, 1, 1)]),
        "rank1 is missing",
    );
    // Level L1 dumps have no module hierarchy.
    let l1 = as_ranks("tf_L1_a", 2, &t.join("src"));
    refused(
        opts(t, l1, None, vec![params(2, 2, 1, 1)]),
        "construct.json is empty",
    );
    // Tensor dumps: statistics only.
    let tensor = as_ranks("tf_small_tensor_a", 2, &t.join("src"));
    refused(
        opts(t, tensor, None, vec![params(2, 2, 1, 1)]),
        "needs statistics dumps",
    );
    // A rank folder without its dump.json.
    let broken = t.join("broken/step0");
    for r in 0..2 {
        let d = broken.join(format!("rank{r}"));
        std::fs::create_dir_all(&d).unwrap();
        for f in ["construct.json", "stack.json"] {
            std::fs::copy(s.path().join("tp4/step0/rank0").join(f), d.join(f)).unwrap();
        }
    }
    refused(opts(t, broken, None, vec![params(2, 2, 1, 1)]), "dump.json");
}
