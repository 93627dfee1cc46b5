//! Conversion on demand with the real engine on real msprobe dumps: start, progress to the end,
//! the result in the catalog; cancel; the concurrency limit; paths that escape the logdir; a bad
//! dump reported in the progress stream; parallel merging (the page's fields reach the engine).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use graph_ascend_proto as pb;
use graph_ascend_service::STAGING_PREFIX;
use graph_ascend_service::{handlers, State};
use tokio_stream::StreamExt;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).expect("copy");
        }
    }
}

/// A logdir holding copies of some dump folders of `tests/fixtures/dumps`.
fn logdir(dumps: &[&str], max: usize) -> (tempfile::TempDir, Arc<State>) {
    let dir = tempfile::tempdir().expect("tempdir");
    for d in dumps {
        copy_dir(
            &common::fixtures().join("dumps").join(d),
            &dir.path().join(d),
        );
    }
    let state = Arc::new(State::with_max_conversions(dir.path().to_path_buf(), max));
    (dir, state)
}

fn request(npu: &str, bench: &str, output: &str) -> pb::ConvertRequest {
    pb::ConvertRequest {
        npu_path: npu.into(),
        bench_path: bench.into(),
        output_path: output.into(),
        ..Default::default()
    }
}

/// Every event of a job's progress stream until it ends.
async fn follow(state: &State, client: &str, job_id: &str) -> Vec<pb::ConvertProgress> {
    let stream = handlers::progress_stream(state, client, job_id);
    tokio::time::timeout(Duration::from_secs(120), stream.collect::<Vec<_>>())
        .await
        .expect("the progress stream ends")
}

fn vis_dbs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(vis_dbs(&p));
        } else if p.to_string_lossy().ends_with(".vis.db") {
            out.push(p);
        }
    }
    out
}

fn staging_left(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(STAGING_PREFIX))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_reports_progress_and_appears_in_the_catalog_when_done() {
    let (dir, state) = logdir(&["mlp_stats"], 2);
    let started =
        handlers::convert_to_graph(&state, "page", request("mlp_stats", "", "conv_build"));
    assert!(started.success, "{:?}", started.error);
    let id = started.job_id.expect("job id");
    // msprobe's id-less stream follows this client's newest job.
    let events = follow(&state, "page", "").await;
    let last = events.last().expect("events");
    assert_eq!(last.status, "done", "{events:?}");
    assert_eq!(last.progress, 100);
    assert_eq!(last.job_id.as_deref(), Some(id.as_str()));
    let progress: Vec<i32> = events.iter().map(|e| e.progress).collect();
    assert!(
        progress.windows(2).all(|w| w[0] <= w[1]),
        "progress never goes back: {progress:?}"
    );
    assert!(events[..events.len() - 1]
        .iter()
        .all(|e| e.status == "building" && e.progress < 100));
    let file = last.output_file.clone().expect("output file");
    assert!(
        file.starts_with("conv_build/") && file.ends_with(".vis.db"),
        "{file}"
    );
    assert!(dir.path().join(&file).is_file());
    assert!(!staging_left(&dir.path().join("conv_build")));
    let listing = handlers::load_meta_dir(&state);
    assert!(
        listing
            .data
            .iter()
            .any(|r| r.run == "conv_build" && r.tags.len() == 1),
        "{listing:?}"
    );
    // A second viewer of a finished job gets its final state at once.
    let again = follow(&state, "other-page", &id).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].status, "done");
    // What was measured (bytes read, rows written) travels with the state,
    // and the one-answer route (the page's fallback when the stream stalls) says the same.
    assert!(
        last.bytes_total > 0.0 && last.bytes_read == last.bytes_total,
        "{last:?}"
    );
    assert!(
        last.rows_total > 0.0 && last.rows_written == last.rows_total,
        "{last:?}"
    );
    let bytes: Vec<f64> = events.iter().map(|e| e.bytes_read).collect();
    assert!(bytes.windows(2).all(|w| w[0] <= w[1]), "{bytes:?}");
    let polled = handlers::convert_state(&state, "other-page", &id);
    assert_eq!(polled.status, "done");
    assert_eq!(polled.output_file.as_deref(), Some(file.as_str()));
    assert_eq!(polled.rows_total, last.rows_total);
    let none = handlers::convert_state(&state, "page", "no-such-job");
    assert_eq!(none.status, "error");
    assert!(none.error[0].contains("no-such-job"), "{none:?}");
    // Candidates list the dump folders, relative to the logdir.
    let c = handlers::load_converted_graph_data(&state)
        .data
        .expect("candidates");
    assert!(
        c.dirs.iter().any(|d| d == "mlp_stats/step0"),
        "{:?}",
        c.dirs
    );
    // The folder the graph was converted into holds no dump: not offered as one.
    assert!(!c.dirs.iter().any(|d| d == "conv_build"), "{:?}", c.dirs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_build_ends_at_once_and_leaves_no_output() {
    let (dir, state) = logdir(&["tf_stats_a", "tf_stats_b"], 2);
    let started = handlers::convert_to_graph(
        &state,
        "page",
        request("tf_stats_b", "tf_stats_a", "conv_cancel"),
    );
    assert!(started.success, "{:?}", started.error);
    let id = started.job_id.expect("job id");
    let cancel = handlers::cancel_convert(&state, "page", &id);
    assert!(cancel.success, "{:?}", cancel.error);
    let events = follow(&state, "page", &id).await;
    assert_eq!(events.last().map(|e| e.status.as_str()), Some("cancelled"));
    // Wait for the engine to return, then nothing may have been published.
    for _ in 0..600 {
        if state.conversions.running() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(state.conversions.running(), 0, "the engine returned");
    assert!(vis_dbs(&dir.path().join("conv_cancel")).is_empty());
    assert!(!staging_left(&dir.path().join("conv_cancel")));
    assert!(!dir.path().join("conv_cancel").exists());
    // Cancelling a finished job is refused.
    assert!(!handlers::cancel_convert(&state, "page", &id).success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversions_beyond_the_limit_are_refused() {
    let (_dir, state) = logdir(&["tf_stats_a", "tf_stats_b"], 1);
    let first = handlers::convert_to_graph(&state, "a", request("tf_stats_b", "tf_stats_a", "one"));
    assert!(first.success, "{:?}", first.error);
    let second = handlers::convert_to_graph(&state, "b", request("tf_stats_a", "", "two"));
    assert!(!second.success);
    assert!(second.error.unwrap_or_default().contains("limit is 1"));
    let events = follow(&state, "a", "").await;
    assert_eq!(events.last().map(|e| e.status.as_str()), Some("done"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_outside_the_logdir_are_refused() {
    let (dir, state) = logdir(&["mlp_stats"], 2);
    let outside = tempfile::tempdir().expect("outside");
    std::os::unix::fs::symlink(outside.path(), dir.path().join("escape")).expect("symlink");
    let cases = [
        request("../mlp_stats", "", "out"),
        request("/tmp", "", "out"),
        request("escape", "", "out"),
        request("mlp_stats", "", "../out"),
        request("mlp_stats", "", "/tmp/out"),
        request("mlp_stats", "", "escape/out"),
        request("mlp_stats", "../x", "out"),
        request("no_such_dir", "", "out"),
        request("mlp_stats", "", ""),
    ];
    for req in cases {
        let r = handlers::convert_to_graph(&state, "page", req.clone());
        assert!(!r.success, "{req:?} was accepted");
        assert!(r.error.is_some());
    }
    let mut lm = request("mlp_stats", "", "out");
    lm.layer_mapping = "../mapping.yaml".into();
    assert!(!handlers::convert_to_graph(&state, "page", lm).success);
    let mut pm = request("mlp_stats", "", "out");
    pm.is_parallel_merge = true;
    let r = handlers::convert_to_graph(&state, "page", pm);
    assert!(r.error.unwrap_or_default().contains("parallel_merge.npu"));
    assert!(std::fs::read_dir(outside.path())
        .expect("outside")
        .next()
        .is_none());
    assert!(!dir.path().join("out").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_parallel_merge_fields_reach_the_engine() {
    let (dir, state) = logdir(&["dist_stats_a"], 2);
    let mut req = request("dist_stats_a/step0", "", "merged");
    req.is_parallel_merge = true;
    req.parallel_merge = Some(pb::ParallelMerge {
        npu: Some(pb::ParallelParams {
            rank_size: 2,
            tp: 2,
            pp: 1,
            vpp: 1,
            order: "tp-cp-ep-dp-pp".into(),
        }),
        bench: None,
    });
    let started = handlers::convert_to_graph(&state, "page", req.clone());
    assert!(started.success, "{:?}", started.error);
    let events = follow(&state, "page", "").await;
    let last = events.last().expect("events");
    assert_eq!(last.status, "done", "{events:?}");
    let dbs = vis_dbs(&dir.path().join("merged"));
    assert_eq!(dbs.len(), 1);
    let conn = rusqlite::Connection::open(&dbs[0]).expect("open");
    let merged: i64 = conn
        .query_row(
            "SELECT count(*) FROM tb_nodes WHERE parallel_merge_info != ''",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert!(merged > 0, "merged nodes carry parallel_merge_info");
    // A wrong layout is the engine's error, reported in the progress stream.
    if let Some(pm) = req.parallel_merge.as_mut() {
        if let Some(n) = pm.npu.as_mut() {
            n.rank_size = 4;
        }
    }
    req.output_path = "merged_bad".into();
    let started = handlers::convert_to_graph(&state, "page", req);
    assert!(started.success, "{:?}", started.error);
    let events = follow(&state, "page", "").await;
    let last = events.last().expect("events");
    assert_eq!(last.status, "error", "{events:?}");
    assert!(
        format!("{events:?}").contains("--rank_size is 4"),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_dump_is_reported_in_the_progress_stream() {
    let (dir, state) = logdir(&["mlp_stats"], 2);
    let bad = dir.path().join("bad_dump/step0/rank0");
    std::fs::create_dir_all(&bad).expect("mkdir");
    // A real rank folder whose dump.json was cut short.
    let good = dir.path().join("mlp_stats/step0/proc16371");
    for f in ["construct.json", "stack.json"] {
        std::fs::copy(good.join(f), bad.join(f)).expect("copy");
    }
    let dump = std::fs::read(good.join("dump.json")).expect("read");
    std::fs::write(bad.join("dump.json"), &dump[..dump.len() / 2]).expect("write");
    let started = handlers::convert_to_graph(&state, "page", request("bad_dump", "", "conv_bad"));
    assert!(started.success, "{:?}", started.error);
    let events = follow(&state, "page", "").await;
    let last = events.last().expect("events");
    assert_eq!(last.status, "error", "{events:?}");
    assert!(
        last.error.iter().any(|e| e.contains("dump.json")),
        "the error names the file: {:?}",
        last.error
    );
    // Relative to the logdir, as the form takes paths: the server's own folders stay private.
    let logdir = dir.path().canonicalize().expect("logdir");
    assert!(
        last.error
            .iter()
            .all(|e| !e.contains(&*logdir.to_string_lossy()))
            && last
                .error
                .iter()
                .any(|e| e.contains("bad_dump/step0/rank0")),
        "the error names the file relative to the logdir: {:?}",
        last.error
    );
    assert!(
        !dir.path().join("conv_bad").exists(),
        "a failed build leaves no output folder behind"
    );
    // A page that started nothing (msprobe's EventSource sends no client id) follows the
    // newest job of all, as msprobe's single progress did.
    let other = follow(&state, "never-started", "").await;
    assert_eq!(other.last().map(|e| e.status.as_str()), Some("error"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_with_nothing_to_follow_says_so_and_ends() {
    let (_dir, state) = logdir(&[], 2);
    let none = follow(&state, "page", "").await;
    assert_eq!(none.len(), 1);
    assert_eq!(none[0].status, "error");
    let unknown = follow(&state, "page", "no-such-job").await;
    assert_eq!(unknown.len(), 1);
    assert!(unknown[0].error[0].contains("no-such-job"));
}

/// Regression: two page conversions into one output folder: the second failed with "already
/// exists" after all its work. Both now succeed, the second under the CLI's numbered name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_conversions_into_one_folder_both_land_under_distinct_names() {
    let (dir, state) = logdir(&["tf_stats_a"], 2);
    let mut ids = Vec::new();
    for client in ["a", "b"] {
        let started = handlers::convert_to_graph(&state, client, request("tf_stats_a", "", "same"));
        assert!(started.success, "{:?}", started.error);
        ids.push((client, started.job_id.expect("job id")));
    }
    let mut outputs = Vec::new();
    for (client, id) in &ids {
        let events = follow(&state, client, id).await;
        let last = events.last().expect("an event");
        assert_eq!(last.status, "done", "{last:?}");
        outputs.push(last.output_file.clone().expect("an output file"));
    }
    // Started in the same second they want the same name, and one is numbered `_2`.
    assert_ne!(outputs[0], outputs[1]);
    assert_eq!(vis_dbs(&dir.path().join("same")).len(), 2);
}

/// Regression: a cancelled conversion with a big layer mapping said "cancelled" while its
/// engine went on for minutes (reading and de-duplicating the mapping), and four of them made
/// every later conversion answer "still finishing". Now each says "cancelled" only once its
/// engine has returned, and a next conversion starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_conversion_with_a_big_mapping_frees_its_slot_when_it_says_so() {
    let (dir, state) = logdir(&["tf_stats_a", "tf_stats_b"], 1);
    let mut yaml = String::new();
    for c in 0..200_000 {
        yaml.push_str(&format!("Class{c}:\n  attn: self_attn\n  mlp.fc: dense\n"));
    }
    std::fs::write(dir.path().join("big.yaml"), yaml).expect("write the mapping");
    for round in 0..4 {
        let mut req = request("tf_stats_b", "tf_stats_a", &format!("out{round}"));
        req.layer_mapping = "big.yaml".into();
        let started = handlers::convert_to_graph(&state, "page", req);
        assert!(started.success, "round {round}: {:?}", started.error);
        let id = started.job_id.expect("job id");
        assert!(handlers::cancel_convert(&state, "page", &id).success);
        let events = follow(&state, "page", &id).await;
        assert_eq!(events.last().map(|e| e.status.as_str()), Some("cancelled"));
        assert_eq!(
            state.conversions.running(),
            0,
            "round {round}: said cancelled while its engine still ran"
        );
    }
    let next = handlers::convert_to_graph(&state, "page", request("tf_stats_a", "", "next"));
    assert!(next.success, "{:?}", next.error);
    let events = follow(&state, "page", &next.job_id.expect("job id")).await;
    assert_eq!(events.last().map(|e| e.status.as_str()), Some("done"));
}
