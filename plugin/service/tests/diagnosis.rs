//! The diagnosis routes through the handlers (no sockets), on files written by msprobe itself:
//! the ranked sources and node verdicts as the browser sees them, the cache per file version,
//! clear errors for other files, the file never written, and the CSV download in chunks.

mod common;

use std::path::Path;
use std::sync::Arc;

use graph_ascend_proto as pb;
use graph_ascend_service::{handlers, State};
use serde_json::Value;

use common::{browser_json, meta, meta_request, unpack, Probe};

fn request(tag: &str, step: i32, rank: i32, states: bool) -> pb::DiagnoseRequest {
    pb::DiagnoseRequest {
        run: "run".into(),
        tag: tag.into(),
        r#type: "db".into(),
        lang: "en".into(),
        micro_step: Some(-1),
        step: Some(step),
        rank: Some(rank),
        top: 0,
        states,
        reference_run: String::new(),
        reference_tag: String::new(),
        client_id: String::new(),
    }
}

fn tag_of(path: &Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).expect("name");
    name.strip_suffix(".vis.db").expect("a .vis.db").to_owned()
}

/// A logdir holding `case` (as msprobe wrote it), a sidecar state, and the file's tag.
fn serve(case: &str) -> (tempfile::TempDir, Arc<State>, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = unpack(case, dir.path(), "run");
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    (dir, state, path)
}

fn names(v: &Value) -> Vec<&str> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|n| n.as_str().expect("a name"))
        .collect()
}

#[test]
fn the_injected_faults_lead_with_their_reasons_and_verdicts() {
    let (_dir, state, path) = serve("compare_tf_stats");
    let answer = browser_json(&handlers::diagnose(
        &state,
        request(&tag_of(&path), 0, 0, true),
    ));
    assert_eq!(answer["success"], true, "{answer}");
    let data = &answer["data"];
    assert_eq!(data["mode"], "statistics");
    assert_eq!(data["step"], 0);
    assert_eq!(data["total_sources"], 2, "{data}");
    // The faults, one per call site, the first occurrence to open.
    assert_eq!(data["total_groups"], 2, "{data}");
    let fault = &data["groups"][0];
    assert_eq!(fault["node"], "Functional.layer_norm.3.forward", "{data}");
    assert_eq!(fault["api"], "Functional.layer_norm", "{data}");
    assert_eq!(fault["ranks"], serde_json::json!([0, 0]), "{data}");
    assert!(
        fault["summary"]
            .as_str()
            .is_some_and(|s| s.contains("in `layers.1.ln2` — eps differs")),
        "{data}"
    );
    let first = &data["sources"][0];
    assert_eq!(first["node"], "Functional.layer_norm.3.forward");
    assert_eq!(first["kind"], "cause");
    assert_eq!(first["direction"], "forward");
    let reason = first["reason"].as_str().expect("reason");
    assert!(reason.contains("argument eps differs"), "{reason}");
    // The same reason as data, for the page to word in its language: the argument with both
    // values, the inputs, the output with its metric and error; unset values are empty.
    let parts = first["reason_parts"].as_array().expect("reason_parts");
    let kinds: Vec<&str> = parts
        .iter()
        .map(|p| p["kind"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        kinds,
        ["argument_differs", "inputs_equal", "output_differs"],
        "{first}"
    );
    assert_eq!(parts[0]["name"], "eps");
    assert!(parts[0]["target"].as_str().is_some_and(|t| !t.is_empty()));
    assert_ne!(parts[0]["target"], parts[0]["golden"]);
    assert_eq!(parts[0]["entry"], "");
    assert!(parts[0].get("err").is_none(), "{}", parts[0]);
    assert!(parts[2]["entry"]
        .as_str()
        .is_some_and(|e| e.starts_with("output")));
    assert!(
        ["Norm", "Max", "Min", "Mean"].contains(&parts[2]["metric"].as_str().unwrap_or("")),
        "{}",
        parts[2]
    );
    assert!(
        parts[2]["err"].as_f64().is_some_and(|e| e > 0.0),
        "{}",
        parts[2]
    );
    assert!(
        names(&first["enclosing"]).contains(&"Module.layers.1.ln2.LayerNorm.forward.0"),
        "{first}"
    );
    assert_eq!(data["sources"][1]["node"], "Functional.linear.10.forward");

    // Verdicts of the shown step and rank: the sources and their modules, then what inherits.
    let states = &answer["states"];
    let source = names(&states["source"]);
    let inherited = names(&states["inherited"]);
    for node in [
        "Functional.layer_norm.3.forward",
        "Module.layers.1.ln2.LayerNorm.forward.0",
        "Functional.linear.10.forward",
        "Module.layers.2.mlp.fc1.Linear.forward.0",
    ] {
        assert!(source.contains(&node), "{node} not in {source:?}");
    }
    assert!(source.iter().all(|n| !inherited.contains(n)));
    // Downstream of ln2 differs without being a source; layer 0's forward, upstream, is fine.
    assert!(
        inherited
            .iter()
            .any(|n| n.starts_with("Module.layers.1.mlp")),
        "{inherited:?}"
    );
    assert!(
        !inherited
            .iter()
            .any(|n| n.starts_with("Module.layers.0.") && n.contains(".forward")),
        "{inherited:?}"
    );
    // Each module with sources inside it, at any depth, and how many: the modules of the two
    // faults hold one each, the model both; a source itself holds none (it is not inside itself).
    let inside = &states["sources_inside"];
    assert_eq!(
        inside["Module.layers.1.ln2.LayerNorm.forward.0"], 1,
        "{inside}"
    );
    assert_eq!(
        inside["Module.layers.2.mlp.FeedForward.forward.0"], 1,
        "{inside}"
    );
    assert!(
        inside.get("Functional.layer_norm.3.forward").is_none(),
        "{inside}"
    );
    let counts: Vec<i64> = inside
        .as_object()
        .expect("an object keyed by node")
        .values()
        .filter_map(Value::as_i64)
        .collect();
    assert_eq!(counts.iter().max(), Some(&2), "{inside}");
    assert!(counts.iter().all(|&c| c == 1 || c == 2), "{inside}");
    // Without `states`, none are sent.
    let lean = browser_json(&handlers::diagnose(
        &state,
        request(&tag_of(&path), 0, 0, false),
    ));
    assert!(lean.get("states").is_none(), "{lean}");
    assert_eq!(lean["data"], answer["data"]);
}

/// Opening a compare file starts its diagnosis (claimed at once, on the opening request's
/// thread) unless the sidecar was started with `--no-diagnosis-prefetch`; either way the
/// Diagnosis panel's request answers.
#[test]
fn opening_a_file_starts_its_diagnosis_unless_the_switch_is_off() {
    for prefetch in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = unpack("compare_tf_stats", dir.path(), "run");
        let state =
            Arc::new(State::new(dir.path().to_path_buf()).with_diagnosis_prefetch(prefetch));
        let tag = tag_of(&path);
        handlers::load_meta_dir(&state);
        let opened = handlers::load_graph_config_info(&state, meta_request(&meta("run", &tag)));
        assert!(opened.success, "{:?}", opened.error);
        // The diagnosis started holds its claim until it is kept: one or the other.
        let started = state.diagnoses.claimed() + state.diagnoses.len();
        if prefetch {
            assert!(started > 0, "opening the file started its diagnosis");
        } else {
            assert_eq!(started, 0, "the switch is off: nothing started");
        }
        let answer = browser_json(&handlers::diagnose(&state, request(&tag, 0, 0, true)));
        assert_eq!(answer["success"], true, "{answer}");
        assert_eq!(answer["data"]["total_groups"], 2, "{answer}");
        assert!(state.diagnoses.len() >= 2, "the diagnosis and the verdicts");
    }
}

/// The diagnosis started when a compare file is opened is background work
/// (`graph_ascend_service::background`): the page's first answers never wait for it. Held back
/// there (as a host busy with those answers holds its idle-priority threads), it keeps its claim
/// while the opening sequence is answered in full, nothing of it computed meanwhile; released,
/// it completes, and the Diagnosis panel is answered.
#[test]
fn the_first_answers_never_wait_for_the_prefetched_diagnosis() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = unpack("compare_tf_stats", dir.path(), "run");
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    let probe = Probe::new(state.clone());
    let tag = tag_of(&path);
    let m = meta("run", &tag);
    probe.load_meta_dir();
    let held = state.background.hold();

    let opened = handlers::load_graph_data(
        &state,
        pb::LoadGraphDataRequest {
            run: m.run.clone(),
            tag: m.tag.clone(),
            r#type: m.r#type.clone(),
            lang: m.lang.clone(),
            micro_step: m.micro_step,
            step: m.step,
            rank: m.rank,
            client_id: probe.client.clone(),
        },
    );
    assert!(opened.success, "{:?}", opened.error);
    assert_eq!(
        state.diagnoses.claimed(),
        1,
        "opening started the diagnosis"
    );
    // The page's opening sequence: its configuration, the node lists, each pane's root, a
    // module, the pass and error filters and the matched relations.
    let ok = |what: &str, answer: Value| {
        assert_eq!(answer["success"], true, "{what}: {answer}");
        answer
    };
    ok("config", probe.config(&m));
    let lists = ok("node list", probe.node_lists(&m));
    assert!(!names(&lists["data"]["npuNodeList"]).is_empty(), "{lists}");
    let root = ok("root", probe.expand(&m, "root", "NPU"));
    ok("Bench root", probe.expand(&m, "root", "Bench"));
    let module = root["data"]
        .as_object()
        .expect("boxes")
        .iter()
        .find(|(_, b)| b["nodeType"] == 0 && b["expand"] == false)
        .map(|(name, _)| name.clone())
        .expect("a module under the root");
    ok("module", probe.expand(&m, &module, "NPU"));
    ok(
        "pass filter",
        probe.filter(&m, "precision", vec!["pass".into()]),
    );
    ok(
        "error filter",
        probe.filter(&m, "precision", vec!["error".into()]),
    );
    ok("matched relations", probe.matched(&m));
    assert_eq!(
        state.diagnoses.len(),
        0,
        "nothing of the diagnosis ran first"
    );
    assert_eq!(state.diagnoses.claimed(), 1, "held, not given up");

    drop(held);
    let answer = browser_json(&handlers::diagnose(&state, request(&tag, 0, 0, true)));
    assert_eq!(answer["success"], true, "{answer}");
    assert_eq!(answer["data"]["total_groups"], 2, "{answer}");
    // The prefetch completes: its claim is given back once the diagnosis and the verdicts are
    // kept (a prefetch that never ends would hang here).
    while state.diagnoses.claimed() > 0 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(state.diagnoses.len() >= 2, "the diagnosis and the verdicts");
}

#[test]
fn top_limits_the_sources_not_their_count() {
    let (_dir, state, path) = serve("compare_tf_stats");
    let mut req = request(&tag_of(&path), 0, 0, false);
    req.top = 1;
    let answer = browser_json(&handlers::diagnose(&state, req));
    assert_eq!(answer["data"]["sources"].as_array().map(Vec::len), Some(1));
    assert_eq!(answer["data"]["total_sources"], 2);
}

#[test]
fn md5_and_overflow_files_are_diagnosed_too() {
    let (_dir, state, path) = serve("compare_tf_md5");
    let answer = browser_json(&handlers::diagnose(
        &state,
        request(&tag_of(&path), 0, 0, true),
    ));
    assert_eq!(answer["data"]["mode"], "md5", "{answer}");
    assert_eq!(answer["data"]["sources"][0]["score"], Value::Null);

    let (_dir, state, path) = serve("compare_mlp_overflow_oc");
    let answer = browser_json(&handlers::diagnose(
        &state,
        request(&tag_of(&path), 0, 0, false),
    ));
    assert_eq!(answer["success"], true, "{answer}");
    let first = &answer["data"]["first_non_finite"][0];
    assert!(
        first["node"].as_str().is_some_and(|n| !n.is_empty()),
        "{answer}"
    );
    assert!(
        first["reason"]
            .as_str()
            .is_some_and(|r| r.contains("inf/NaN")),
        "{answer}"
    );
    let kinds: Vec<&str> = first["reason_parts"]
        .as_array()
        .expect("reason_parts")
        .iter()
        .map(|p| p["kind"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(kinds, ["inputs_finite", "holds_non_finite"], "{first}");
}

#[test]
fn a_build_file_gets_a_clear_error_in_the_pages_language() {
    let (_dir, state, path) = serve("build_tf_stats");
    let answer = browser_json(&handlers::diagnose(
        &state,
        request(&tag_of(&path), 0, 0, true),
    ));
    assert_eq!(answer["success"], false);
    let error = answer["error"].as_str().expect("error");
    assert!(error.starts_with("Diagnosis failed:"), "{error}");
    assert!(error.contains("not a compare file"), "{error}");
    assert!(error.contains(&tag_of(&path)), "names the file: {error}");
    let mut zh = request(&tag_of(&path), 0, 0, false);
    zh.lang = "zh".into();
    let answer = browser_json(&handlers::diagnose(&state, zh));
    assert!(
        answer["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("诊断失败")),
        "{answer}"
    );
    // Nothing failed is cached.
    assert!(state.diagnoses.is_empty());
    // An unknown step or file.
    let (_dir, state, path) = serve("compare_tf_stats");
    let answer = browser_json(&handlers::diagnose(
        &state,
        request(&tag_of(&path), 7, 0, false),
    ));
    assert_eq!(answer["success"], false, "{answer}");
    let answer = browser_json(&handlers::diagnose(&state, request("nope", 0, 0, false)));
    assert_eq!(answer["success"], false, "{answer}");
}

/// msprobe's structure-only compare (`task: structure`) holds no data: the answer says so
/// plainly, in the page's language, as no failure of the diagnosis.
#[test]
fn a_structure_only_file_has_nothing_to_diagnose() {
    let (_dir, state, path) = serve("compare_tf_structure");
    let answer = browser_json(&handlers::diagnose(
        &state,
        request(&tag_of(&path), 0, 0, true),
    ));
    assert_eq!(answer["success"], false, "{answer}");
    assert_eq!(
        answer["error"],
        "This is a structure-only comparison: its dumps hold the model's structure but no data, \
         so there is nothing to diagnose."
    );
    let mut zh = request(&tag_of(&path), 0, 0, false);
    zh.lang = "zh".into();
    let answer = browser_json(&handlers::diagnose(&state, zh));
    assert!(
        answer["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("这是仅结构比对")),
        "{answer}"
    );
}

#[test]
fn diagnoses_are_cached_per_file_version_and_the_file_is_never_written() {
    let (dir, state, path) = serve("compare_tf_stats");
    let tag = tag_of(&path);
    let before = std::fs::read(&path).expect("read");
    let first = browser_json(&handlers::diagnose(&state, request(&tag, 0, 0, true)));
    assert_eq!(
        state.diagnoses.len(),
        2,
        "the file's diagnosis and the verdicts"
    );
    let again = browser_json(&handlers::diagnose(&state, request(&tag, 0, 0, true)));
    assert_eq!(first, again);
    assert_eq!(state.diagnoses.len(), 2, "answered from the cache");
    assert_eq!(
        std::fs::read(&path).expect("read"),
        before,
        "file unchanged"
    );
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    assert!(!Path::new(&wal).exists(), "no log left beside the file");

    // Another file replaces it under the same name: the next answer is the new file's.
    let other = tempfile::tempdir().expect("tempdir");
    let md5 = unpack("compare_tf_md5", other.path(), "run");
    std::fs::copy(&md5, &path).expect("replace the file");
    let replaced = browser_json(&handlers::diagnose(&state, request(&tag, 0, 0, true)));
    assert_eq!(replaced["data"]["mode"], "md5", "{replaced}");
    assert_eq!(
        state.diagnoses.len(),
        2,
        "the old version's entries are dropped"
    );
    drop(dir);
}

/// The chunks of one export, the receiver accepting at most `accept` of them.
fn export(state: &State, req: pb::ExportCsvRequest, accept: usize) -> Vec<pb::FileChunk> {
    let mut chunks = Vec::new();
    handlers::export_csv(state, req, &mut |chunk| {
        chunks.push(chunk);
        chunks.len() < accept
    });
    chunks
}

fn csv_request(tag: &str, step: Option<i32>, rank: Option<i32>) -> pb::ExportCsvRequest {
    pb::ExportCsvRequest {
        run: "run".into(),
        tag: tag.into(),
        r#type: String::new(),
        lang: "en".into(),
        step,
        rank,
        client_id: String::new(),
    }
}

#[test]
fn the_csv_download_comes_in_chunks_with_its_type_and_name() {
    let (_dir, state, path) = serve("compare_tf_stats");
    let tag = tag_of(&path);
    let chunks = export(&state, csv_request(&tag, None, None), usize::MAX);
    let head = &chunks[0];
    assert!(head.success, "{head:?}");
    assert_eq!(head.content_type, handlers::CSV_CONTENT_TYPE);
    assert_eq!(head.file_name, format!("{tag}.csv"));
    assert!(head.data.is_empty());
    let body: Vec<u8> = chunks[1..].iter().flat_map(|c| c.data.clone()).collect();
    assert!(chunks[1..].iter().all(|c| c.success));
    let text = String::from_utf8(body).expect("UTF-8");
    assert!(
        text.starts_with("Step,Rank,NPU Node,Bench Node,Role,"),
        "{}",
        &text[..80]
    );
    assert!(text.contains(",Module.layers.2.mlp.fc1.Linear.forward.0,"));
    // The same bytes as the diagnose crate's writer gives.
    let file = graph_ascend_diagnose::CompareFile::open(&path).expect("open");
    let mut direct = Vec::new();
    graph_ascend_diagnose::export::write_csv(&file, None, None, &mut direct).expect("write");
    assert_eq!(text.as_bytes(), &direct[..]);

    let one = export(&state, csv_request(&tag, Some(0), Some(0)), usize::MAX);
    assert_eq!(one[0].file_name, format!("{tag}_step0_rank0.csv"));
}

#[test]
fn csv_errors_come_first_and_a_gone_receiver_stops_the_export() {
    let (_dir, state, path) = serve("compare_tf_stats");
    let tag = tag_of(&path);
    let bad_step = export(&state, csv_request(&tag, Some(9), None), usize::MAX);
    assert_eq!(bad_step.len(), 1);
    assert!(!bad_step[0].success);
    let error = bad_step[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("no step 9"), "{error}");
    let missing = export(&state, csv_request("nope", None, None), usize::MAX);
    assert!(!missing[0].success && missing.len() == 1);
    // The receiver goes away after the first chunk: nothing more is sent.
    let stopped = export(&state, csv_request(&tag, None, None), 1);
    assert_eq!(stopped.len(), 1);

    let (_dir, state, path) = serve("build_tf_stats");
    let build = export(&state, csv_request(&tag_of(&path), None, None), usize::MAX);
    assert!(!build[0].success);
    assert!(
        build[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("not a compare file")),
        "{build:?}"
    );
}

/// A bad row late in the file: the download was 200 with its headers sent and an empty or cut
/// body (the reason only in TensorBoard's log). The whole CSV is made before anything is sent,
/// so the first chunk is the error, naming the file, the node and what is wrong.
#[test]
fn a_csv_with_a_bad_row_answers_the_error_first() {
    let (_dir, state, path) = serve("compare_tf_stats");
    let tag = tag_of(&path);
    let broken = {
        let conn = rusqlite::Connection::open(&path).expect("open");
        let name: String = conn
            .query_row(
                "SELECT node_name FROM tb_nodes WHERE matched_node_link IS NOT NULL \
                 AND matched_node_link NOT IN ('', '[]') ORDER BY rowid DESC LIMIT 1",
                [],
                |row| row.get(0),
            )
            .expect("a matched node");
        conn.execute(
            "UPDATE tb_nodes SET input_data = '{\"broken' WHERE node_name = ?1",
            [&name],
        )
        .expect("break its row");
        name
    };
    let chunks = export(&state, csv_request(&tag, None, None), usize::MAX);
    assert_eq!(chunks.len(), 1, "only the error: {:?}", chunks[0]);
    assert!(!chunks[0].success);
    let error = chunks[0].error.as_deref().unwrap_or_default();
    assert!(error.contains(&path.display().to_string()), "{error}");
    assert!(error.contains(&broken), "{error}");
    assert!(error.contains("input_data"), "{error}");
}

#[test]
fn a_two_rank_file_has_verdicts_per_rank() {
    let (_dir, state, path) = serve("compare_dist_ranks");
    let tag = tag_of(&path);
    let answer = browser_json(&handlers::diagnose(&state, request(&tag, 0, 1, true)));
    assert_eq!(answer["success"], true, "{answer}");
    assert_eq!(answer["data"]["ranks"], serde_json::json!([0, 1]));
    assert_eq!(answer["states"]["rank"], 1);
    // The verdicts of rank 1 name rank 1's sources (and their modules), and only those.
    let sources = answer["data"]["sources"].as_array().expect("sources");
    let mut expected: Vec<&str> = sources
        .iter()
        .filter(|s| s["rank"] == 1)
        .flat_map(|s| {
            std::iter::once(&s["node"]).chain(s["enclosing"].as_array().into_iter().flatten())
        })
        .map(|n| n.as_str().expect("name"))
        .collect();
    let mut verdict = names(&answer["states"]["source"]);
    assert!(!expected.is_empty(), "{answer}");
    expected.sort_unstable();
    verdict.sort_unstable();
    assert_eq!(verdict, expected);
    // One line per fault over both ranks: it opens on rank 0 and lists rank 1's occurrence.
    let fault = &answer["data"]["groups"][0];
    assert_eq!(fault["ranks"], serde_json::json!([0, 1]), "{fault}");
    assert_eq!(fault["rank"], 0, "{fault}");
    let others = fault["others"].as_array().expect("others");
    assert_eq!(others.len(), 1, "{fault}");
    assert_eq!(others[0]["rank"], 1, "{fault}");
    assert_eq!(others[0]["step"], 0, "{fault}");
    assert!(
        others[0]["node"].as_str().is_some_and(|n| !n.is_empty()),
        "{fault}"
    );
    let rank0 = browser_json(&handlers::diagnose(&state, request(&tag, 0, 0, true)));
    assert_eq!(rank0["states"]["rank"], 0);
    assert_eq!(
        rank0["data"], answer["data"],
        "the file's diagnosis does not depend on the view"
    );
}

/// A reference compare of the catalog: the tolerances learned from it are said in the answer
/// (and cached apart from the file's own diagnosis); one of another model is refused, naming it.
#[test]
fn a_reference_of_the_catalog_teaches_the_tolerances_and_another_model_is_refused() {
    let (dir, state, path) = serve("compare_tf_stats");
    let tag = tag_of(&path);
    // Without a reference: the dtype table, tightened from the file itself (or the table).
    let own = browser_json(&handlers::diagnose(&state, request(&tag, 0, 0, false)));
    assert_eq!(own["success"], true, "{own}");
    let source = own["data"]["tolerances"]["source"].as_str().unwrap_or("");
    assert!(matches!(source, "tightened" | "table"), "{own}");
    // The same compare as its own reference (same model, every kind learned from it).
    let reference = unpack("compare_tf_stats", dir.path(), "ref");
    let mut req = request(&tag, 0, 0, true);
    req.reference_run = "ref".into();
    req.reference_tag = tag_of(&reference);
    let learned = browser_json(&handlers::diagnose(&state, req.clone()));
    assert_eq!(learned["success"], true, "{learned}");
    let tol = &learned["data"]["tolerances"];
    assert_eq!(tol["source"], "reference", "{learned}");
    assert_eq!(
        tol["reference"].as_str(),
        reference.file_name().and_then(|n| n.to_str())
    );
    assert!(
        tol["kinds"].as_array().is_some_and(|k| !k.is_empty()),
        "{learned}"
    );
    assert!(learned["states"].is_object(), "{learned}");
    // Another model's compare is refused with its name.
    let other = unpack("compare_mlp_overflow_oc", dir.path(), "other");
    req.reference_run = "other".into();
    req.reference_tag = tag_of(&other);
    let refused = browser_json(&handlers::diagnose(&state, req));
    assert_eq!(refused["success"], false, "{refused}");
    let error = refused["error"].as_str().unwrap_or("");
    assert!(
        error.contains(&tag_of(&other)) && error.contains("another model"),
        "{error}"
    );
}
