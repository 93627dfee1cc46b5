//! The write side against msprobe 26.2's recorded answers, and what msprobe could not do.
//!
//! `tests/fixtures/golden_api26_sequence/matching.json.xz` holds sections D (`compare_tf_stats`,
//! summary task) and E (`compare_tf_md5`, md5 task) of msprobe's golden request sequence: views,
//! filters, deletes and adds of matches (leaf, module with descendants, errors), saving the
//! `.vis.config`, matching by it, colours, precision recomputation. They are replayed here in
//! order through the handlers on fresh copies of the same files, and every answer is compared
//! with msprobe's (the parts listed in `compare`). Then: two clients editing one file at once,
//! edits surviving a restart, and the `.vis.config` format.

mod common;

use std::sync::Arc;

use graph_ascend_proto as pb;
use graph_ascend_service::json_to_prost;
use graph_ascend_service::{handlers, State};
use serde_json::{json, Value};

use common::{browser_json, fixtures, unpack};

fn sequence() -> Vec<Value> {
    let path = fixtures().join("golden_api26_sequence/matching.json.xz");
    let mut input = std::io::BufReader::new(std::fs::File::open(&path).expect("sequence fixture"));
    let mut raw = Vec::new();
    lzma_rs::xz_decompress(&mut input, &mut raw).expect("decompress");
    let v: Value = serde_json::from_slice(&raw).expect("sequence JSON");
    v["steps"].as_array().cloned().expect("steps")
}

/// A logdir with the two files the sequence edits, under the run names msprobe had.
fn logdir() -> (tempfile::TempDir, Arc<State>) {
    let dir = tempfile::tempdir().expect("tempdir");
    unpack("compare_tf_stats", dir.path(), "compare_tf_stats");
    unpack("compare_tf_md5", dir.path(), "compare_tf_md5");
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    handlers::load_meta_dir(&state);
    (dir, state)
}

fn meta_of(v: &Value) -> pb::MetaData {
    let int = |k: &str| v.get(k).and_then(Value::as_i64).map(|i| i as i32);
    let text = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    pb::MetaData {
        run: text("run"),
        tag: text("tag"),
        r#type: text("type"),
        lang: text("lang"),
        micro_step: int("microStep"),
        step: int("step"),
        rank: int("rank"),
    }
}

fn node_ref(body: &Value) -> pb::NodeRequest {
    pb::NodeRequest {
        node_info: body.get("nodeInfo").map(|n| pb::NodeRef {
            node_name: n["nodeName"].as_str().unwrap_or_default().into(),
            node_type: n["nodeType"].as_str().unwrap_or_default().into(),
        }),
        meta_data: Some(meta_of(&body["metaData"])),
        client_id: "golden".into(),
    }
}

/// Asks one recorded request of the handlers; the answer as the browser sees it, rendered by the
/// sidecar's one JSON definition (`graph_ascend_proto::json`), as `CallJson` renders it.
fn ask(state: &State, route: &str, body: &Value, params: &Value) -> Value {
    let meta = || Some(meta_of(&body["metaData"]));
    let meta_req = || pb::MetaRequest {
        meta_data: meta(),
        client_id: "golden".into(),
    };
    let text = |k: &str| body[k].as_str().unwrap_or_default().to_owned();
    let flag = |k: &str| body[k].as_bool().unwrap_or(false);
    let match_req = || pb::MatchNodesRequest {
        npu_node_name: text("npuNodeName"),
        bench_node_name: text("benchNodeName"),
        meta_data: meta(),
        is_match_children: flag("isMatchChildren"),
        is_un_match_children: flag("isUnMatchChildren"),
        client_id: "golden".into(),
    };
    match route {
        "loadGraphData" => {
            let m = meta_of(params);
            browser_json(&handlers::load_graph_data(
                state,
                pb::LoadGraphDataRequest {
                    run: m.run,
                    tag: m.tag,
                    r#type: m.r#type,
                    lang: m.lang,
                    micro_step: m.micro_step,
                    step: m.step,
                    rank: m.rank,
                    client_id: "golden".into(),
                },
            ))
        }
        "loadGraphConfigInfo" => browser_json(&handlers::load_graph_config_info(state, meta_req())),
        "loadGraphAllNodeList" => {
            browser_json(&handlers::load_graph_all_node_list(state, meta_req()))
        }
        "loadGraphMatchedRelations" => {
            browser_json(&handlers::load_graph_matched_relations(state, meta_req()))
        }
        "changeNodeExpandState" => browser_json(&handlers::change_node_expand_state(
            state,
            "golden",
            node_ref(body),
        )),
        "updateHierarchyData" => browser_json(&handlers::update_hierarchy_data(
            state,
            "golden",
            pb::UpdateHierarchyRequest {
                graph_type: text("graphType"),
                meta_data: meta(),
                client_id: "golden".into(),
            },
        )),
        "getNodeInfo" => browser_json(&handlers::get_node_info(state, node_ref(body))),
        "filterNodes" | "screen" => {
            let values: Vec<prost_types::Value> = body["values"]
                .as_array()
                .map(|a| a.iter().map(json_to_prost).collect())
                .unwrap_or_default();
            browser_json(&handlers::filter_nodes(
                state,
                pb::FilterNodesRequest {
                    meta_data: meta(),
                    r#type: text("type"),
                    values: Some(prost_types::ListValue { values }),
                    client_id: "golden".into(),
                },
            ))
        }
        "addMatchNodes" => browser_json(&handlers::add_match_nodes(state, match_req())),
        "deleteMatchNodes" => browser_json(&handlers::delete_match_nodes(state, match_req())),
        "addMatchNodesByConfig" => browser_json(&handlers::add_match_nodes_by_config(
            state,
            pb::MatchByConfigRequest {
                config_file: text("configFile"),
                meta_data: meta(),
                client_id: "golden".into(),
            },
        )),
        "saveMatchedRelations" => {
            browser_json(&handlers::save_matched_relations(state, meta_req()))
        }
        "updateColors" => browser_json(&handlers::update_colors(
            state,
            pb::UpdateColorsRequest {
                meta_data: meta(),
                colors: text("colors"),
                client_id: "golden".into(),
            },
        )),
        "updatePrecisionError" => browser_json(&handlers::update_precision_error(
            state,
            pb::UpdatePrecisionErrorRequest {
                meta_data: meta(),
                filter_value: body["filterValue"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
                client_id: "golden".into(),
            },
        )),
        other => panic!("route {other} is not part of this sequence"),
    }
}

/// Compares `got` with msprobe's `want`: every key msprobe sent must be there and equal
/// (numbers to 1e-9 relative; a missing key equals `null`), except the keys of `skip`.
fn compare(got: &Value, want: &Value, path: &str, skip: &[&str], out: &mut Vec<String>) {
    match (got, want) {
        (_, Value::Object(w)) => {
            for (k, wv) in w {
                if skip.contains(&k.as_str()) {
                    continue;
                }
                let gv = got.get(k).unwrap_or(&Value::Null);
                compare(gv, wv, &format!("{path}.{k}"), skip, out);
            }
            if let (Value::Object(g), false) = (got, w.is_empty()) {
                for k in g.keys() {
                    if !w.contains_key(k) && !skip.contains(&k.as_str()) && !g[k].is_null() {
                        out.push(format!("{path}.{k}: not in msprobe's answer"));
                    }
                }
            }
        }
        (Value::Array(g), Value::Array(w)) => {
            if g.len() != w.len() {
                out.push(format!("{path}: {} items, msprobe {}", g.len(), w.len()));
                return;
            }
            for (i, (gv, wv)) in g.iter().zip(w).enumerate() {
                compare(gv, wv, &format!("{path}[{i}]"), skip, out);
            }
        }
        (Value::Number(g), Value::Number(w)) => {
            let (g, w) = (
                g.as_f64().unwrap_or(f64::NAN),
                w.as_f64().unwrap_or(f64::NAN),
            );
            if (g - w).abs() > 1e-9 * w.abs().max(1.0) {
                out.push(format!("{path}: {g} != msprobe {w}"));
            }
        }
        (g, w) if g == w => {}
        // An error keeps msprobe's message and may say, after it, which file and why.
        (Value::String(g), Value::String(w))
            if path.ends_with("error") && g.starts_with(&format!("{w} ")) => {}
        (g, w) => out.push(format!("{path}: {g} != msprobe {w}")),
    }
}

/// Steps whose answers are not compared, and why.
const NOT_COMPARED: [(i64, &str); 1] = [(
    82,
    "colors sent as a JSON object: the API takes a JSON string, the shim refuses anything else",
)];

#[test]
fn replays_msprobes_matching_sequence() {
    let (_dir, state) = logdir();
    let mut failures = Vec::new();
    let mut compared = 0;
    for step in sequence() {
        let seq = step["seq"].as_i64().unwrap_or(-1);
        if NOT_COMPARED.iter().any(|(s, _)| *s == seq) {
            continue;
        }
        let route = step["route"].as_str().unwrap_or_default();
        let got = ask(&state, route, &step["body"], &step["params"]);
        let mut got = got;
        let mut want = step["response"].clone();
        // msprobe keeps the unmatched lists in a cache and appends to them as pairs are
        // unmatched; the file's node order is what a restart of msprobe shows. Same members.
        for v in [&mut got, &mut want] {
            for key in ["npuUnMatchNodes", "benchUnMatchNodes"] {
                if let Some(Value::Array(list)) = v.get_mut("data").and_then(|d| d.get_mut(key)) {
                    list.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                }
            }
        }
        let want = &want;
        let mut problems = Vec::new();
        if want["success"] == json!(false) {
            // Failures: msprobe sends `data: {}` or `null` beside the error; the error counts.
            compare(
                &got["success"],
                &want["success"],
                "success",
                &[],
                &mut problems,
            );
            compare(&got["error"], &want["error"], "error", &[], &mut problems);
        } else {
            let skip: &[&str] = match route {
                // Render-info keys msprobe sends that are not about matching.
                "changeNodeExpandState" | "updateHierarchyData" => &["matchedDistributed"],
                // `detailColumns` is ours, added beside msprobe's keys: the metric rules the page
                // paints by (docs/frontend.md).
                "loadGraphConfigInfo" => &[
                    "microSteps",
                    "tooltips",
                    "overflowCheck",
                    "ranks",
                    "steps",
                    "detailColumns",
                ],
                "getNodeInfo" => &[
                    "id",
                    "node_name",
                    "node_type",
                    "stack_info",
                    "micro_step_id",
                    "parallel_merge_info",
                    "matched_distributed",
                    "overflow_level",
                    "modified",
                ],
                _ => &[],
            };
            compare(&got, want, "", skip, &mut problems);
        }
        compared += 1;
        if !problems.is_empty() {
            failures.push(format!(
                "step {seq} {route}: {} differences, e.g.\n    {}",
                problems.len(),
                problems[..problems.len().min(6)].join("\n    ")
            ));
        }
    }
    assert!(compared >= 50, "only {compared} steps compared");
    assert!(
        failures.is_empty(),
        "{} of {compared} steps differ from msprobe:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn meta(run: &str, tag: &str) -> pb::MetaData {
    common::meta(run, tag)
}

fn match_req(
    m: &pb::MetaData,
    npu: &str,
    bench: &str,
    children: bool,
    client: &str,
) -> pb::MatchNodesRequest {
    pb::MatchNodesRequest {
        npu_node_name: npu.into(),
        bench_node_name: bench.into(),
        meta_data: Some(m.clone()),
        is_match_children: children,
        is_un_match_children: children,
        client_id: client.into(),
    }
}

/// Every matched target node's partner points back at it, on both sides.
fn assert_links_consistent(state: &State, m: &pb::MetaData) {
    let r = handlers::load_graph_matched_relations(
        state,
        pb::MetaRequest {
            meta_data: Some(m.clone()),
            client_id: String::new(),
        },
    );
    let d = r.data.expect("relations");
    let bench: std::collections::HashMap<_, _> = d
        .bench_match_nodes
        .iter()
        .map(|p| (p.key.clone(), p.value.clone()))
        .collect();
    for p in &d.npu_match_nodes {
        assert_eq!(
            bench.get(&p.value),
            Some(&p.key),
            "{} → {} is not mirrored on the golden side",
            p.key,
            p.value
        );
    }
    assert_eq!(d.npu_match_nodes.len(), d.bench_match_nodes.len());
}

#[test]
fn two_clients_matching_at_once_corrupt_nothing() {
    let (dir, state) = logdir();
    let m = meta("compare_tf_stats", "compare_20261122090320");
    // Two clients, two different modules, each unmatching and rematching with descendants.
    let work = |client: &'static str, module: &'static str| {
        let state = state.clone();
        let m = m.clone();
        std::thread::spawn(move || {
            for _ in 0..6 {
                let del = handlers::delete_match_nodes(
                    &state,
                    match_req(&m, module, module, true, client),
                );
                assert!(del.success, "{client} delete: {:?}", del.error);
                let add =
                    handlers::add_match_nodes(&state, match_req(&m, module, module, true, client));
                assert!(add.success, "{client} add: {:?}", add.error);
                let d = add.data.expect("relations");
                assert_eq!(
                    d.matched_total, d.matched_success,
                    "{client}: every pair matched"
                );
            }
        })
    };
    let a = work("tab-a", "Module.layers.1.Block.forward.0");
    let b = work("tab-b", "Module.layers.2.Block.forward.0");
    a.join().expect("client a");
    b.join().expect("client b");
    assert_links_consistent(&state, &m);
    // The same edits seen by a fresh server over the same files (a restart).
    let restarted = Arc::new(State::new(dir.path().to_path_buf()));
    handlers::load_meta_dir(&restarted);
    assert_links_consistent(&restarted, &m);
    let r = handlers::load_graph_matched_relations(
        &restarted,
        pb::MetaRequest {
            meta_data: Some(m.clone()),
            client_id: String::new(),
        },
    );
    assert!(r.data.expect("relations").npu_un_match_nodes.is_empty());
}

#[test]
fn edits_survive_a_restart_and_the_config_file_round_trips() {
    let (dir, state) = logdir();
    let m = meta("compare_tf_stats", "compare_20261122090320");
    let leaf = "Functional.linear.10.forward";
    let del = handlers::delete_match_nodes(&state, match_req(&m, leaf, leaf, false, "x"));
    assert!(del.success);
    let restarted = Arc::new(State::new(dir.path().to_path_buf()));
    handlers::load_meta_dir(&restarted);
    let info = handlers::get_node_info(&restarted, common::node_request(&m, leaf, "NPU"));
    let npu = info.data[0].detail.clone().expect("npu detail");
    assert!(
        npu.matched_node_link.is_empty(),
        "the unmatch was persisted"
    );

    // Re-match crosswise (forward with its own twin), save, and check the file msprobe's way.
    let add = handlers::add_match_nodes(&restarted, match_req(&m, leaf, leaf, false, "x"));
    assert!(add.success);
    let saved = handlers::save_matched_relations(
        &restarted,
        pb::MetaRequest {
            meta_data: Some(m.clone()),
            client_id: String::new(),
        },
    );
    let name = saved.data.expect("file name");
    assert_eq!(name, "compare_20261122090320_0_0.vis.config");
    let text =
        std::fs::read_to_string(dir.path().join("compare_tf_stats").join(&name)).expect("config");
    assert!(text.starts_with("{\n    \""), "indent=4 JSON: {text}");
    let v: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(v[leaf], json!(leaf));
    assert_eq!(
        v["Functional.linear.10.backward"],
        json!("Functional.linear.10.backward")
    );

    // Unmatch, then match again from the file.
    assert!(
        handlers::delete_match_nodes(&restarted, match_req(&m, leaf, leaf, false, "x")).success
    );
    let by = handlers::add_match_nodes_by_config(
        &restarted,
        pb::MatchByConfigRequest {
            config_file: name,
            meta_data: Some(m.clone()),
            client_id: String::new(),
        },
    );
    assert!(by.success, "{:?}", by.error);
    assert_links_consistent(&restarted, &m);

    // Paths are refused, not followed.
    let bad = handlers::add_match_nodes_by_config(
        &restarted,
        pb::MatchByConfigRequest {
            config_file: "../compare_tf_md5/x.vis.config".into(),
            meta_data: Some(m.clone()),
            client_id: String::new(),
        },
    );
    assert!(!bad.success);
}

#[test]
fn save_data_answers_success_since_edits_are_already_committed() {
    let (_dir, state) = logdir();
    let m = meta("compare_tf_stats", "compare_20261122090320");
    let r = handlers::save_data(
        &state,
        pb::MetaRequest {
            meta_data: Some(m),
            client_id: String::new(),
        },
    );
    assert!(r.success, "{:?}", r.error);
    let bad = handlers::save_data(
        &state,
        pb::MetaRequest {
            meta_data: Some(meta("nope", "nope")),
            client_id: String::new(),
        },
    );
    assert!(!bad.success);
}

/// Task `all`: a pair unmatched and matched again by hand gets the same tensor metrics, result
/// and precision that msprobe's converter computed from the real tensors.
#[test]
fn a_manual_match_in_tensor_mode_recomputes_msprobes_metrics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = unpack("compare_tf_small_tensor", dir.path(), "run");
    let dumps = fixtures().join("dumps");
    let tensor_dir = |case: &str, proc: &str| {
        dumps
            .join(case)
            .join("step0")
            .join(proc)
            .join("dump_tensor_data")
            .canonicalize()
            .expect("tensor dump folder")
            .to_string_lossy()
            .into_owned()
    };
    {
        // The file records where msprobe's dumps were; point it at the fixtures' copies.
        let conn = rusqlite::Connection::open(&db).expect("open");
        conn.execute(
            "UPDATE tb_nodes SET dump_data_dir=? WHERE data_source='NPU'",
            [tensor_dir("tf_small_tensor_b", "proc10852")],
        )
        .expect("update");
        conn.execute(
            "UPDATE tb_nodes SET dump_data_dir=? WHERE data_source='Bench'",
            [tensor_dir("tf_small_tensor_a", "proc10848")],
        )
        .expect("update");
    }
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    let listing = handlers::load_meta_dir(&state);
    let tag = listing.data[0].tags[0].clone();
    let m = meta("run", &tag);
    let leaves = [
        "Functional.linear.10.forward",
        "Functional.layer_norm.3.forward",
        "Torch.matmul.4.forward",
        "Functional.softmax.2.forward",
    ];
    let info = |name: &str| {
        let r = handlers::get_node_info(&state, common::node_request(&m, name, "NPU"));
        r.data[0].detail.clone().expect("npu detail")
    };
    let columns = [
        "Cosine",
        "EucDist",
        "MaxAbsErr",
        "MaxRelativeErr",
        "One Thousandth Err Ratio",
        "Five Thousandths Err Ratio",
        "Result",
    ];
    let mut checked = 0;
    for leaf in leaves {
        let before = info(leaf);
        assert!(
            !before.matched_node_link.is_empty(),
            "{leaf} starts matched"
        );
        let partner = before.matched_node_link.last().cloned().expect("partner");
        let del = handlers::delete_match_nodes(&state, match_req(&m, leaf, &partner, false, "t"));
        assert!(del.success, "{leaf}: {:?}", del.error);
        let cleared = info(leaf);
        assert!(browser_json(&cleared)["output_data"]
            .to_string()
            .find("Cosine")
            .is_none());
        let add = handlers::add_match_nodes(&state, match_req(&m, leaf, &partner, false, "t"));
        assert!(add.success, "{leaf}: {:?}", add.error);
        let after = info(leaf);
        assert_eq!(
            before.data.as_ref().and_then(|d| d.precision_index),
            after.data.as_ref().and_then(|d| d.precision_index),
            "{leaf}: precision"
        );
        for (b, a) in [
            (
                browser_json(&before)["input_data"].clone(),
                browser_json(&after)["input_data"].clone(),
            ),
            (
                browser_json(&before)["output_data"].clone(),
                browser_json(&after)["output_data"].clone(),
            ),
        ] {
            let (Value::Object(b), Value::Object(a)) = (b, a) else {
                panic!("slots are objects")
            };
            for (slot, want) in &b {
                for col in columns {
                    let (w, g) = (&want[col], &a[slot][col]);
                    let num = |v: &Value| match v {
                        Value::Number(n) => n.as_f64(),
                        Value::String(s) => s.trim().parse::<f64>().ok(),
                        _ => None,
                    };
                    match (num(w), num(g)) {
                        (Some(x), Some(y)) => assert!(
                            (x - y).abs() <= 1e-6 * x.abs().max(1.0),
                            "{slot} {col}: {y} != msprobe {x}"
                        ),
                        _ => assert_eq!(
                            w.as_str().map(str::trim),
                            g.as_str().map(str::trim),
                            "{slot} {col}"
                        ),
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} values compared");
}

/// Matching needs a comparison: a single-graph file answers msprobe's `taskTypeError` text
/// (golden step 021), and matching by configuration file on a task `all` file says why instead of
/// msprobe's empty error (golden step 108).
#[test]
fn matching_needs_a_comparison_task() {
    let dir = tempfile::tempdir().expect("tempdir");
    unpack("build_mlp_step0", dir.path(), "single");
    unpack("compare_tf_small_tensor", dir.path(), "tensor");
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    let listing = handlers::load_meta_dir(&state);
    let tag = |run: &str| {
        listing
            .data
            .iter()
            .find(|r| r.run == run)
            .map(|r| r.tags[0].clone())
            .expect("listed")
    };
    let single = meta("single", &tag("single"));
    let leaf = "Module.fc1.Linear.parameters_grad.0";
    let r = handlers::add_match_nodes(&state, match_req(&single, leaf, leaf, false, "t"));
    assert!(!r.success);
    assert_eq!(r.error.as_deref(), Some("task type not support"));
    let tensor = meta("tensor", &tag("tensor"));
    let r = handlers::add_match_nodes_by_config(
        &state,
        pb::MatchByConfigRequest {
            config_file: "any.vis.config".into(),
            meta_data: Some(tensor),
            client_id: String::new(),
        },
    );
    assert!(!r.success);
    assert_eq!(r.error.as_deref(), Some("task type not support"));
}

/// Two clients re-matching the same target node to different golden nodes at once: whoever
/// commits last wins, and the loser's golden node is released, never left pointing at a node
/// that points elsewhere.
#[test]
fn competing_matches_of_one_node_leave_consistent_links() {
    let (_dir, state) = logdir();
    let m = meta("compare_tf_stats", "compare_20261122090320");
    let npu = "Functional.linear.10.forward";
    let work = |client: &'static str, bench: &'static str| {
        let state = state.clone();
        let m = m.clone();
        std::thread::spawn(move || {
            for _ in 0..8 {
                let add =
                    handlers::add_match_nodes(&state, match_req(&m, npu, bench, false, client));
                assert!(add.success, "{client}: {:?}", add.error);
            }
        })
    };
    let a = work("tab-a", "Functional.linear.10.forward");
    let b = work("tab-b", "Functional.linear.11.forward");
    a.join().expect("client a");
    b.join().expect("client b");
    let r = handlers::load_graph_matched_relations(
        &state,
        pb::MetaRequest {
            meta_data: Some(m.clone()),
            client_id: String::new(),
        },
    );
    let d = r.data.expect("relations");
    let partner = d
        .npu_match_nodes
        .iter()
        .find(|p| p.key == npu)
        .map(|p| p.value.clone())
        .expect("the node is matched");
    // The golden node it lost (if any) is unmatched now, unless it got its own partner back.
    for bench in [
        "Functional.linear.10.forward",
        "Functional.linear.11.forward",
    ] {
        let back = d.bench_match_nodes.iter().find(|p| p.key == bench);
        if bench == partner {
            assert_eq!(back.map(|p| p.value.as_str()), Some(npu));
        } else {
            assert!(
                back.is_none_or(|p| p.value != npu),
                "{bench} still points at {npu}"
            );
        }
    }
    assert_links_consistent(&state, &m);
}

/// One pair matched crosswise (target `linear.10` with golden `linear.11`, and its backward
/// twin), saved and loaded again: the file names each pair once, target → golden, and loading it
/// reports two pairs, both matched (msprobe's file also held each pair backwards, so loading it
/// said "4 pairs, 2 succeeded, 2 failed"). A file written msprobe's way loads the same.
#[test]
fn a_saved_config_loads_back_as_the_pairs_saved() {
    let (dir, state) = logdir();
    let m = meta("compare_tf_stats", "compare_20261122090320");
    let name = saved_and_loaded_back(dir.path(), &state, &m);
    assert_eq!(name, "compare_20261122090320_0_0.vis.config");
}

/// Regression (issue 42, item 12): the matches of a run tagged in Chinese could not be saved
/// (its file name was refused as not plain). They are saved under the tag, in UTF-8, and load
/// back the same (msprobe 26.2 refuses to save that name, and loads it).
#[test]
fn the_matches_of_a_file_tagged_in_chinese_are_saved_and_load_back() {
    let (dir, _) = logdir();
    let run = dir.path().join("compare_tf_stats");
    std::fs::rename(
        run.join("compare_20261122090320.vis.db"),
        run.join("模型对比.vis.db"),
    )
    .expect("rename");
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    handlers::load_meta_dir(&state);
    let m = meta("compare_tf_stats", "模型对比");
    let name = saved_and_loaded_back(dir.path(), &state, &m);
    assert_eq!(name, "模型对比_0_0.vis.config");
    let config = browser_json(&handlers::load_graph_config_info(
        &state,
        pb::MetaRequest {
            meta_data: Some(m.clone()),
            client_id: String::new(),
        },
    ));
    let listed = config["data"]["matchedConfigFiles"].to_string();
    assert!(listed.contains("模型对比_0_0.vis.config"), "{listed}");
}

/// Matches one pair crosswise, saves the matches and loads them back (see the test above);
/// returns the saved file's name.
fn saved_and_loaded_back(dir: &std::path::Path, state: &Arc<State>, m: &pb::MetaData) -> String {
    let state = state.as_ref();
    let (a, b) = (
        "Functional.linear.10.forward",
        "Functional.linear.11.forward",
    );
    for leaf in [a, b] {
        assert!(handlers::delete_match_nodes(state, match_req(m, leaf, leaf, false, "x")).success);
    }
    assert!(handlers::add_match_nodes(state, match_req(m, a, b, false, "x")).success);
    let meta_req = || pb::MetaRequest {
        meta_data: Some(m.clone()),
        client_id: String::new(),
    };
    let saved = handlers::save_matched_relations(state, meta_req());
    assert!(saved.success, "{:?}", saved.error);
    let name = saved.data.expect("file name");
    let path = dir.join("compare_tf_stats").join(&name);
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("config")).expect("JSON");
    assert_eq!(
        saved,
        json!({
            "Functional.linear.10.forward": "Functional.linear.11.forward",
            "Functional.linear.10.backward": "Functional.linear.11.backward",
        })
    );
    let load = |file: &str| {
        assert!(handlers::delete_match_nodes(state, match_req(m, a, b, false, "x")).success);
        let by = handlers::add_match_nodes_by_config(
            state,
            pb::MatchByConfigRequest {
                config_file: file.into(),
                meta_data: Some(m.clone()),
                client_id: String::new(),
            },
        );
        assert!(by.success, "{:?}", by.error);
        let data = by.data.expect("relations");
        (data.matched_total, data.matched_success)
    };
    assert_eq!(load(&name), (Some(2), Some(2)));
    // msprobe's way: both sides' rows, so every pair also golden → target.
    let both_ways = json!({
        "Functional.linear.10.forward": "Functional.linear.11.forward",
        "Functional.linear.10.backward": "Functional.linear.11.backward",
        "Functional.linear.11.forward": "Functional.linear.10.forward",
        "Functional.linear.11.backward": "Functional.linear.10.backward",
    });
    std::fs::write(
        dir.join("compare_tf_stats/msprobe_0_0.vis.config"),
        serde_json::to_string_pretty(&both_ways).expect("JSON"),
    )
    .expect("write");
    assert_eq!(load("msprobe_0_0.vis.config"), (Some(2), Some(2)));
    assert_links_consistent(state, m);
    name
}
