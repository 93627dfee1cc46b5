//! Our output against msprobe's own `.vis.db` for every carried fixture case.
//!
//! Each case runs the converter on the real dumps in `tests/fixtures/dumps/` with the arguments
//! msprobe was run with (see each case's `run.log`) and compares the result node by node with
//! msprobe's file (`tests/fixtures/upstream_vis/<case>/*.vis.db.xz`) using the project's diff
//! tool. Cases we do not match yet are `#[ignore]`d with the reason, so they stay visible.
//! The parallel-merge cases are in `tests/merge.rs`.

use std::path::{Path, PathBuf};

use graph_ascend_convert::{convert, ConvertOptions, LayerMapping};
use graph_ascend_visdb::diff::{diff_files, DiffOptions};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// The single rank folder of `<dump>/step0/` (`proc<pid>` or `rank0`).
fn rank_dir(dump: &str) -> PathBuf {
    let step = fixtures().join("dumps").join(dump).join("step0");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&step)
        .unwrap_or_else(|e| panic!("{}: {e}", step.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.remove(0)
}

fn upstream_db(case: &str, into: &Path) -> PathBuf {
    let dir = fixtures().join("upstream_vis").join(case);
    let xz = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".vis.db.xz"))
        .unwrap_or_else(|| panic!("no .vis.db.xz in {}", dir.display()));
    let mut input = std::io::BufReader::new(std::fs::File::open(&xz).unwrap());
    let out_path = into.join("upstream.vis.db");
    let mut out = std::fs::File::create(&out_path).unwrap();
    lzma_rs::xz_decompress(&mut input, &mut out).unwrap();
    out_path
}

fn run_case(
    case: &str,
    target: PathBuf,
    golden: Option<PathBuf>,
    tweak: impl Fn(&mut ConvertOptions),
) {
    run_case_messages(case, target, golden, tweak);
}

/// [`run_case`], returning the progress messages of the conversion.
fn run_case_messages(
    case: &str,
    target: PathBuf,
    golden: Option<PathBuf>,
    tweak: impl Fn(&mut ConvertOptions),
) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = ConvertOptions {
        target,
        golden,
        output: tmp.path().join("out"),
        ..Default::default()
    };
    tweak(&mut opts);
    let messages = std::sync::Mutex::new(Vec::new());
    let ours = convert(&opts, &|p| messages.lock().unwrap().push(p.message.clone()))
        .unwrap_or_else(|e| panic!("{case}: conversion failed: {e}"));
    // Our writer lays out the SQLite pages itself: SQLite must find the file sound.
    let check: String = rusqlite::Connection::open(&ours)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok", "{case}: integrity_check");
    let theirs = upstream_db(case, tmp.path());
    let report = diff_files(&ours, &theirs, DiffOptions::default()).unwrap();
    assert!(
        report.is_equal(),
        "{case}: {} difference(s) ({} rows ours, {} rows msprobe):\n{}",
        report.total,
        report.rows_left,
        report.rows_right,
        report.differences.join("\n")
    );
    messages.into_inner().unwrap()
}

fn dump(name: &str) -> PathBuf {
    fixtures().join("dumps").join(name)
}

#[test]
fn build_mlp_step0() {
    run_case("build_mlp_step0", rank_dir("mlp_stats"), None, |_| {});
}

#[test]
fn build_mlp_steps() {
    run_case("build_mlp_steps", dump("mlp_stats"), None, |_| {});
}

#[test]
fn build_mlp_overflow_oc() {
    run_case(
        "build_mlp_overflow_oc",
        rank_dir("mlp_overflow"),
        None,
        |o| o.overflow_check = true,
    );
}

#[test]
fn compare_mlp_overflow_oc() {
    run_case(
        "compare_mlp_overflow_oc",
        rank_dir("mlp_overflow"),
        Some(rank_dir("mlp_stats")),
        |o| o.overflow_check = true,
    );
}

#[test]
fn build_tf_stats() {
    run_case("build_tf_stats", rank_dir("tf_stats_a"), None, |_| {});
}

#[test]
fn build_tf_l0() {
    run_case("build_tf_L0", rank_dir("tf_L0_a"), None, |_| {});
}

#[test]
fn compare_tf_stats() {
    run_case(
        "compare_tf_stats",
        rank_dir("tf_stats_b"),
        Some(rank_dir("tf_stats_a")),
        |_| {},
    );
}

#[test]
fn compare_tf_stats_steps() {
    run_case(
        "compare_tf_stats_steps",
        dump("tf_stats_b"),
        Some(dump("tf_stats_a")),
        |_| {},
    );
}

#[test]
fn compare_tf_stats_oc() {
    run_case(
        "compare_tf_stats_oc",
        rank_dir("tf_stats_b"),
        Some(rank_dir("tf_stats_a")),
        |o| o.overflow_check = true,
    );
}

#[test]
fn compare_tf_stats_fm() {
    run_case(
        "compare_tf_stats_fm",
        rank_dir("tf_stats_b"),
        Some(rank_dir("tf_stats_a")),
        |o| o.fuzzy_match = true,
    );
}

#[test]
fn compare_tf_stats_lm_bare() {
    run_case(
        "compare_tf_stats_lm_bare",
        rank_dir("tf_stats_b"),
        Some(rank_dir("tf_stats_a")),
        |o| o.layer_mapping = LayerMapping::Bare,
    );
}

#[test]
fn compare_tf_renamed_nolm() {
    run_case(
        "compare_tf_renamed_nolm",
        rank_dir("tf_renamed_stats_b"),
        Some(rank_dir("tf_stats_a")),
        |_| {},
    );
}

#[test]
fn compare_tf_renamed_lm_bare() {
    run_case(
        "compare_tf_renamed_lm_bare",
        rank_dir("tf_renamed_stats_b"),
        Some(rank_dir("tf_stats_a")),
        |o| o.layer_mapping = LayerMapping::Bare,
    );
}

#[test]
fn compare_tf_md5() {
    run_case(
        "compare_tf_md5",
        rank_dir("tf_md5_b"),
        Some(rank_dir("tf_md5_a")),
        |_| {},
    );
}

#[test]
fn build_dist_ranks() {
    run_case(
        "build_dist_ranks",
        dump("dist_stats_a").join("step0"),
        None,
        |_| {},
    );
}

#[test]
fn compare_dist_ranks() {
    run_case(
        "compare_dist_ranks",
        dump("dist_stats_b").join("step0"),
        Some(dump("dist_stats_a").join("step0")),
        |_| {},
    );
}

#[test]
fn compare_dist_ranks_oc() {
    run_case(
        "compare_dist_ranks_oc",
        dump("dist_stats_b").join("step0"),
        Some(dump("dist_stats_a").join("step0")),
        |o| o.overflow_check = true,
    );
}

/// Like [`run_case`] but without comparing `dump_data_dir` (msprobe recorded the absolute tensor
/// folder of the machine it ran on).
fn run_tensor_case(case: &str, target: PathBuf, golden: Option<PathBuf>) {
    let tmp = tempfile::tempdir().unwrap();
    let opts = ConvertOptions {
        target,
        golden,
        output: tmp.path().join("out"),
        ..Default::default()
    };
    let ours = convert(&opts, &|_| {}).unwrap_or_else(|e| panic!("{case}: conversion failed: {e}"));
    let theirs = upstream_db(case, tmp.path());
    let diff_opts = DiffOptions {
        ignore_columns: &["dump_data_dir"],
        ..Default::default()
    };
    let report = diff_files(&ours, &theirs, diff_opts).unwrap();
    assert!(
        report.is_equal(),
        "{case}: {} difference(s):\n{}",
        report.total,
        report.differences.join("\n")
    );
}

#[test]
fn build_tf_small_tensor() {
    run_tensor_case("build_tf_small_tensor", rank_dir("tf_small_tensor_a"), None);
}

#[test]
fn compare_tf_small_tensor() {
    run_tensor_case(
        "compare_tf_small_tensor",
        rank_dir("tf_small_tensor_b"),
        Some(rank_dir("tf_small_tensor_a")),
    );
}

#[test]
fn build_ms_stats() {
    run_case("build_ms_stats", rank_dir("ms_stats_a"), None, |_| {});
}

#[test]
fn build_ms_stats_steps() {
    run_case("build_ms_stats_steps", dump("ms_stats_a"), None, |_| {});
}

#[test]
fn build_ms_l0() {
    run_case("build_ms_L0", rank_dir("ms_L0_a"), None, |_| {});
}

#[test]
fn compare_ms_stats() {
    run_case(
        "compare_ms_stats",
        rank_dir("ms_stats_b"),
        Some(rank_dir("ms_stats_a")),
        |_| {},
    );
}

#[test]
fn compare_ms_stats_fm() {
    run_case(
        "compare_ms_stats_fm",
        rank_dir("ms_stats_b"),
        Some(rank_dir("ms_stats_a")),
        |o| o.fuzzy_match = true,
    );
}

#[test]
fn compare_ms_vs_pt_lm_bare() {
    run_case(
        "compare_ms_vs_pt_lm_bare",
        rank_dir("ms_stats_a"),
        Some(rank_dir("tf_stats_a")),
        |o| o.layer_mapping = LayerMapping::Bare,
    );
}

#[test]
fn compare_ms_vs_pt_md5_lm_bare() {
    run_case(
        "compare_ms_vs_pt_md5_lm_bare",
        rank_dir("ms_md5_a"),
        Some(rank_dir("tf_md5_a")),
        |o| o.layer_mapping = LayerMapping::Bare,
    );
}

#[test]
fn compare_ms_vs_pt_renamed_lm_bare() {
    run_case(
        "compare_ms_vs_pt_renamed_lm_bare",
        rank_dir("ms_stats_a"),
        Some(rank_dir("tf_renamed_stats_b")),
        |o| o.layer_mapping = LayerMapping::Bare,
    );
}

fn layer_mapping_yaml(name: &str) -> LayerMapping {
    LayerMapping::File(fixtures().join("layer_mapping").join(name))
}

#[test]
fn compare_tf_renamed_lm_yaml() {
    run_case(
        "compare_tf_renamed_lm_yaml",
        rank_dir("tf_renamed_stats_b"),
        Some(rank_dir("tf_stats_a")),
        |o| o.layer_mapping = layer_mapping_yaml("layer_mapping_renamed.yaml"),
    );
}

#[test]
fn compare_ms_vs_pt_renamed_lm_yaml() {
    run_case(
        "compare_ms_vs_pt_renamed_lm_yaml",
        rank_dir("ms_stats_a"),
        Some(rank_dir("tf_renamed_stats_b")),
        |o| o.layer_mapping = layer_mapping_yaml("layer_mapping_ms_to_pt_renamed.yaml"),
    );
}

/// `Cell` (old top-level key), rules spanning several levels, dotted targets, a `name(...)`
/// target, and a renamed child left unmapped.
#[test]
fn compare_tf_renamed_lm_yaml_multilevel() {
    run_case(
        "compare_tf_renamed_lm_yaml_multilevel",
        rank_dir("tf_renamed_stats_b"),
        Some(rank_dir("tf_stats_a")),
        |o| o.layer_mapping = layer_mapping_yaml("layer_mapping_multilevel.yaml"),
    );
}

/// A copy of a rank folder with `stack.json` in the old form `{node: [frames]}` (msprobe's layer
/// mapping only finds frames in that form, and then puts the calling function in the scope).
fn with_old_stack(rank: &Path, into: &Path) -> PathBuf {
    let dst = into.join(rank.file_name().unwrap());
    std::fs::create_dir_all(&dst).unwrap();
    for f in ["dump.json", "construct.json"] {
        std::fs::copy(rank.join(f), dst.join(f)).unwrap();
    }
    let text = std::fs::read_to_string(rank.join("stack.json")).unwrap();
    let new: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text).unwrap();
    let mut old = serde_json::Map::new();
    for (_, entry) in new {
        let names = entry[0].as_array().unwrap();
        for n in names {
            old.insert(n.as_str().unwrap().to_string(), entry[1].clone());
        }
    }
    std::fs::write(dst.join("stack.json"), serde_json::to_string(&old).unwrap()).unwrap();
    dst
}

#[test]
fn compare_ms_vs_pt_renamed_oldstack_lm_yaml() {
    let tmp = tempfile::tempdir().unwrap();
    let target = with_old_stack(&rank_dir("ms_stats_a"), &tmp.path().join("t"));
    let golden = with_old_stack(&rank_dir("tf_renamed_stats_b"), &tmp.path().join("g"));
    run_case(
        "compare_ms_vs_pt_renamed_oldstack_lm_yaml",
        target,
        Some(golden),
        |o| o.layer_mapping = layer_mapping_yaml("layer_mapping_ms_to_pt_renamed.yaml"),
    );
}

/// msprobe refuses these (exit code 1, no db); so must we, with a message naming the cause.
fn expect_failure(target: PathBuf, golden: Option<PathBuf>, lm: LayerMapping, needle: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let opts = ConvertOptions {
        target,
        golden,
        output: out.clone(),
        layer_mapping: lm,
        ..Default::default()
    };
    let err = convert(&opts, &|_| {}).expect_err("conversion must fail");
    let msg = err.to_string();
    assert!(msg.contains(needle), "message {msg:?} lacks {needle:?}");
    let leftovers = std::fs::read_dir(&out).map(|d| d.count()).unwrap_or(0);
    assert_eq!(leftovers, 0, "nothing may be left in the output folder");
}

#[test]
fn build_tf_l1_fails_clearly() {
    expect_failure(
        rank_dir("tf_L1_a"),
        None,
        LayerMapping::None,
        "construct.json is empty",
    );
}

#[test]
fn build_ms_l1_fails_clearly() {
    expect_failure(
        rank_dir("ms_L1_a"),
        None,
        LayerMapping::None,
        "construct.json is empty",
    );
}

#[test]
fn compare_ms_vs_pt_without_lm_is_refused() {
    expect_failure(
        rank_dir("ms_stats_a"),
        Some(rank_dir("tf_stats_a")),
        LayerMapping::None,
        "different frameworks",
    );
}

// -lm FILE that cannot be used. A missing, unreadable or wrongly named file is an error naming
// it (msprobe only warns and goes on without a mapping); a file whose content is not a mapping
// of mappings of strings gives msprobe's warning and an empty node mapping: every node then looks
// for its own id, wherever it sits (not bare -lm's result, which pairs entries by scope).

#[test]
fn lm_yaml_missing_is_an_error() {
    let missing = fixtures().join("layer_mapping").join("no_such_file.yaml");
    expect_failure(
        rank_dir("tf_renamed_stats_b"),
        Some(rank_dir("tf_stats_a")),
        LayerMapping::File(missing),
        "no_such_file.yaml: cannot read the layer mapping file",
    );
}

#[test]
fn lm_yaml_unreadable_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a_folder.yaml");
    std::fs::create_dir_all(&dir).unwrap();
    expect_failure(
        rank_dir("tf_renamed_stats_b"),
        Some(rank_dir("tf_stats_a")),
        LayerMapping::File(dir),
        "a_folder.yaml: cannot read the layer mapping file",
    );
}

#[test]
fn lm_yaml_needs_the_yaml_suffix() {
    let tmp = tempfile::tempdir().unwrap();
    let yml = tmp.path().join("mapping.yml");
    std::fs::write(&yml, "Block:\n  self_attn: attn\n").unwrap();
    expect_failure(
        rank_dir("tf_renamed_stats_b"),
        Some(rank_dir("tf_stats_a")),
        LayerMapping::File(yml),
        "mapping.yml: a layer mapping file must be a .yaml file",
    );
}

#[test]
fn lm_yaml_unusable_content_warns_and_maps_nothing() {
    for (text, needle) in [
        ("", "found nothing"),
        ("- self_attn\n- attn\n", "found a list"),
        ("Block: null\n", "rules of \"Block\""),
        ("Block:\n  0: attn\n", "not text -> text"),
        ("Block: {self_attn: attn\n", "not valid YAML"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let yaml = tmp.path().join("mapping.yaml");
        std::fs::write(&yaml, text).unwrap();
        let messages = run_case_messages(
            "compare_tf_renamed_lm_yaml_unusable",
            rank_dir("tf_renamed_stats_b"),
            Some(rank_dir("tf_stats_a")),
            |o| o.layer_mapping = LayerMapping::File(yaml.clone()),
        );
        let warning = messages
            .iter()
            .find(|m| m.starts_with("warning: "))
            .unwrap_or_else(|| panic!("{text:?}: no warning in {messages:?}"));
        assert!(
            warning.contains("mapping.yaml") && warning.contains(needle),
            "{text:?}: {warning:?} lacks {needle:?}"
        );
    }
}

#[test]
fn lm_yaml_duplicate_keys_keep_the_last_value() {
    let tmp = tempfile::tempdir().unwrap();
    let yaml = tmp.path().join("mapping.yaml");
    std::fs::write(
        &yaml,
        "Block:\n  self_attn: nothing\n  ffn: mlp\n  self_attn: attn\n",
    )
    .unwrap();
    let messages = run_case_messages(
        "compare_tf_renamed_lm_yaml",
        rank_dir("tf_renamed_stats_b"),
        Some(rank_dir("tf_stats_a")),
        |o| o.layer_mapping = LayerMapping::File(yaml.clone()),
    );
    assert!(messages.iter().all(|m| !m.starts_with("warning: ")));
}

/// A dump entry that breaks msprobe's naming rules (fewer than four dotted fields) makes msprobe
/// drop the mapping of that rank pair; the conversion goes on.
#[test]
fn lm_malformed_dump_name_drops_the_mapping() {
    let tmp = tempfile::tempdir().unwrap();
    let rank = tmp.path().join("rank0");
    std::fs::create_dir_all(&rank).unwrap();
    let src = rank_dir("tf_renamed_stats_b");
    for f in ["construct.json", "stack.json"] {
        std::fs::copy(src.join(f), rank.join(f)).unwrap();
    }
    let text = std::fs::read_to_string(src.join("dump.json")).unwrap();
    let mut dump: serde_json::Value = serde_json::from_str(&text).unwrap();
    dump["data"]
        .as_object_mut()
        .unwrap()
        .insert("Odd.name.forward".into(), serde_json::json!({}));
    std::fs::write(rank.join("dump.json"), dump.to_string()).unwrap();

    let npu = graph_ascend_convert::RankDump::read(&rank, false).unwrap();
    let bench = graph_ascend_convert::RankDump::read(&rank_dir("tf_stats_a"), false).unwrap();
    let lm = LayerMapping::File(
        fixtures()
            .join("layer_mapping")
            .join("layer_mapping_renamed.yaml"),
    );
    let mapping = graph_ascend_convert::layer_mapping::mapping_for(
        &lm,
        &npu,
        &bench,
        &std::sync::atomic::AtomicBool::new(false),
    )
    .unwrap();
    assert!(mapping.is_empty());
    let out = tmp.path().join("out");
    let opts = ConvertOptions {
        target: rank,
        golden: Some(rank_dir("tf_stats_a")),
        output: out,
        layer_mapping: lm,
        ..Default::default()
    };
    convert(&opts, &|_| {}).expect("the conversion goes on without the mapping");
}

// Structure-only dumps (`task: structure`, `"data": {}`): a 2-layer transformer against a 3-layer
// one with its blocks' modules renamed, dumped by mindstudio-probe 26.2. A build is an ordinary
// build; a compare is `tb_config.task = "structure"`, the tensor-mode tool tips with empty texts
// and only the grey unmatched colour.

#[test]
fn build_tf_structure() {
    run_case(
        "build_tf_structure",
        rank_dir("tf_structure_a"),
        None,
        |_| {},
    );
}

#[test]
fn compare_tf_structure() {
    run_case(
        "compare_tf_structure",
        rank_dir("tf_structure_b"),
        Some(rank_dir("tf_structure_a")),
        |_| {},
    );
}

/// A copy of the rank folder of `dump` in `into/name` whose dump.json is `dump_json`.
fn with_dump_json(dump: &str, into: &Path, name: &str, dump_json: serde_json::Value) -> PathBuf {
    let src = rank_dir(dump);
    let dir = into.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["construct.json", "stack.json"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    std::fs::write(dir.join("dump.json"), dump_json.to_string()).unwrap();
    dir
}

/// A structure dump's dump.json, with `data`, and `task` (`None`: no task key).
fn structure_dump_json(task: Option<&str>, data: serde_json::Value) -> serde_json::Value {
    let mut d = serde_json::json!({"level": "mix", "framework": "pytorch",
                                   "dump_data_dir": null, "data": data});
    if let Some(t) = task {
        d["task"] = t.into();
    }
    d
}

/// Statistics for one node that both structure dumps have.
fn embedding_data() -> serde_json::Value {
    let item = serde_json::json!({"type": "torch.Tensor", "dtype": "torch.float32",
        "shape": [2, 4], "Max": 1.0, "Min": -1.0, "Mean": 0.0, "Norm": 2.0,
        "requires_grad": false});
    serde_json::json!({"Module.embed.Embedding.forward.0":
        {"input_args": [item], "input_kwargs": {}, "output": [item]}})
}

/// Data on a golden node only: msprobe pairs compare rows from the target's items, so there is
/// nothing to compare and the file is the plain structure compare's (msprobe's file frozen).
#[test]
fn compare_tf_structure_golden_data() {
    let tmp = tempfile::tempdir().unwrap();
    let target = with_dump_json(
        "tf_structure_b",
        tmp.path(),
        "b_plain",
        structure_dump_json(Some("structure"), serde_json::json!({})),
    );
    let golden = with_dump_json(
        "tf_structure_a",
        tmp.path(),
        "a_data",
        structure_dump_json(Some("structure"), embedding_data()),
    );
    run_case(
        "compare_tf_structure_golden_data",
        target,
        Some(golden),
        |_| {},
    );
}

/// A matched target node with data in a structure compare: msprobe stops ("The parameter "mode"
/// error, expected summary/all/md5, actually structure", exit code 1, no file); so do we,
/// naming the dump and the node.
#[test]
fn compare_tf_structure_with_target_data_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let target = with_dump_json(
        "tf_structure_b",
        tmp.path(),
        "b_data",
        structure_dump_json(Some("structure"), embedding_data()),
    );
    let named = format!(
        "{}: task \"structure\", yet node Module.embed.Embedding.forward.0 has data",
        target.join("dump.json").display()
    );
    expect_failure(
        target,
        Some(rank_dir("tf_structure_a")),
        LayerMapping::None,
        &named,
    );
}

/// A compare needs each dump's task (msprobe's `check_dump_json_key`: "Task for npu is empty",
/// "Task for bench is empty", exit code 1); a build does not.
#[test]
fn compare_without_task_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, task) in [("no_task", None), ("empty_task", Some(""))] {
        let untasked = with_dump_json(
            "tf_structure_b",
            tmp.path(),
            name,
            structure_dump_json(task, serde_json::json!({})),
        );
        let named = format!(
            "{}: the dump's \"task\" is empty or missing",
            untasked.join("dump.json").display()
        );
        let other = rank_dir("tf_structure_a");
        for (target, golden) in [
            (untasked.clone(), other.clone()),
            (other.clone(), untasked.clone()),
        ] {
            expect_failure(target, Some(golden), LayerMapping::None, &named);
        }
        let out = tmp.path().join(format!("{name}_build"));
        let opts = ConvertOptions {
            target: untasked,
            output: out,
            ..Default::default()
        };
        convert(&opts, &|_| {}).expect("a dump without a task builds");
    }
}

// Recompute (activation checkpointing): mindstudio-probe 26.2's dump of a 2-layer transformer
// whose decoder runs each block through torch's reentrant checkpoint, with the recomputed
// blocks' construct.json parents removed (`Block.forward.1` and `Block.backward.1` of each
// layer: null), the placement of older collectors and custom checkpoint functions. msprobe's
// `_handle_recompute` moves them under `Decoder.backward.0`, the backward call of their layer's
// first-run parent (its file frozen).

#[test]
fn build_tf_recompute_toplevel() {
    run_case(
        "build_tf_recompute_toplevel",
        rank_dir("tf_recompute_toplevel"),
        None,
        |_| {},
    );
}

/// The parent of `id` in the graph of `dir`, by id.
fn parent_of(dir: &Path, id: &str) -> Option<String> {
    let (_, g) = graph_ascend_convert::RankDump::read_and_build(dir, false).unwrap();
    let n = g.get(id).unwrap_or_else(|| panic!("no node {id}"));
    g.nodes[n].parent().map(|p| g.id(p).to_string())
}

/// PyTorch dumps are judged by their frames: without stack.json's frames nothing is moved; a
/// MindSpore dump is judged by its ids alone (msprobe reads no frames there).
#[test]
fn recompute_is_recognised_by_frames_in_pytorch_dumps_only() {
    let block = "Module.decoder.layers.0.Block.forward.1";
    let moved = Some("Module.decoder.Decoder.backward.0".to_string());
    let real = rank_dir("tf_recompute_toplevel");
    assert_eq!(parent_of(&real, block), moved);
    let tmp = tempfile::tempdir().unwrap();
    let dump: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(real.join("dump.json")).unwrap()).unwrap();
    for (framework, parent) in [
        ("pytorch", Some("DefaultModel".to_string())),
        ("mindspore", moved),
    ] {
        let mut d = dump.clone();
        d["framework"] = framework.into();
        let dir = with_dump_json("tf_recompute_toplevel", tmp.path(), framework, d);
        std::fs::write(dir.join("stack.json"), "{}").unwrap();
        assert_eq!(parent_of(&dir, block), parent, "{framework}");
    }
}
