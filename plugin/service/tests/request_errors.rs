//! Requests that fail say which file and why (msprobe's message, then the reason), and a file
//! that a request names is never read in a way that can hold the request for good.

mod common;

use std::sync::Arc;
use std::time::Duration;

use graph_ascend_proto as pb;
use graph_ascend_service::{handlers, State};
use graph_ascend_testkit::special_files::make_fifo;

use common::{meta, meta_request, unpack};

const RUN: &str = "compare_tf_stats";
const TAG: &str = "compare_20261122090320";

/// A logdir with one compare file (summary task), served.
fn served() -> (tempfile::TempDir, Arc<State>, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = unpack(RUN, dir.path(), RUN);
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    handlers::load_meta_dir(&state);
    (dir, state, path)
}

fn by_config(name: &str) -> pb::MatchByConfigRequest {
    pb::MatchByConfigRequest {
        config_file: name.into(),
        meta_data: Some(meta(RUN, TAG)),
        client_id: String::new(),
    }
}

/// A FIFO swapped in where a matching configuration was: opened by name, the request (and its
/// thread) waited for a writer for good. It is refused at once, naming the file and what it is.
/// (The guard only keeps a regression from hanging the test run.)
#[test]
fn a_fifo_matching_configuration_is_refused_without_blocking() {
    let (dir, state, _) = served();
    let fifo = dir.path().join(RUN).join("pairs.vis.config");
    make_fifo(&fifo);
    let (send, answered) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(handlers::add_match_nodes_by_config(
            &state,
            by_config("pairs.vis.config"),
        ));
    });
    let answer = answered
        .recv_timeout(Duration::from_secs(60))
        .expect("the request is answered (a FIFO is never opened for a blocking read)");
    assert!(!answer.success);
    let error = answer.error.unwrap_or_default();
    assert!(error.starts_with("match node failed "), "{error}");
    assert!(error.contains(&fifo.display().to_string()), "{error}");
    assert!(
        error.contains("not a regular file (it is a FIFO)"),
        "{error}"
    );
}

#[test]
fn a_matching_configuration_that_is_a_link_or_not_json_is_refused_naming_it() {
    let (dir, state, _) = served();
    let folder = dir.path().join(RUN);
    std::fs::write(folder.join("bad.vis.config"), "[1, 2").expect("write");
    let bad = handlers::add_match_nodes_by_config(&state, by_config("bad.vis.config"));
    let error = bad.error.unwrap_or_default();
    assert!(error.contains("bad.vis.config: not JSON"), "{error}");
    std::os::unix::fs::symlink(
        folder.join("bad.vis.config"),
        folder.join("link.vis.config"),
    )
    .expect("symlink");
    let link = handlers::add_match_nodes_by_config(&state, by_config("link.vis.config"));
    let error = link.error.unwrap_or_default();
    assert!(
        error.contains("link.vis.config is a symbolic link, which is not followed"),
        "{error}"
    );
    let path = handlers::add_match_nodes_by_config(&state, by_config("../x.vis.config"));
    let error = path.error.unwrap_or_default();
    assert!(
        error.contains("\"../x.vis.config\" is not a file name of the run's folder"),
        "{error}"
    );
}

/// "The database file could not be opened." says why: no such file in the logdir, or the
/// listing's error for it (the file and what is wrong with it). Regression (issue 42, item 12):
/// these answers, open to every reader, named the server's absolute folders; they name paths
/// below the logdir, as a conversion's errors do.
#[test]
fn a_file_that_cannot_be_served_is_named_with_the_reason() {
    let (dir, state, _) = served();
    let absolute = [
        dir.path().display().to_string(),
        dir.path()
            .canonicalize()
            .expect("canonical")
            .display()
            .to_string(),
    ];
    let absent = handlers::load_graph_config_info(&state, meta_request(&meta(RUN, "nope")));
    let error = absent.error.unwrap_or_default();
    assert!(
        error.starts_with("The database file could not be opened."),
        "{error}"
    );
    assert!(error.contains("nope.vis.db"), "{error}");
    assert!(error.contains("the logdir holds no"), "{error}");
    for root in &absolute {
        assert!(!error.contains(root.as_str()), "{error}");
    }

    let garbage = dir.path().join(RUN).join("garbage.vis.db");
    std::fs::write(&garbage, b"this is not a database").expect("write");
    // A file just written may still be growing: it is reported once its size has settled (seen
    // unchanged a second apart).
    handlers::load_meta_dir(&state);
    std::thread::sleep(Duration::from_millis(1100));
    handlers::load_meta_dir(&state);
    let answer = handlers::load_graph_config_info(&state, meta_request(&meta(RUN, "garbage")));
    let error = answer.error.unwrap_or_default();
    assert!(
        error.starts_with("The database file could not be opened."),
        "{error}"
    );
    assert!(error.contains(&format!("{RUN}/garbage.vis.db")), "{error}");
    assert!(error.contains("file is not a database"), "{error}");
    assert!(!error.contains("holds no"), "the listing's reason: {error}");
    let listing = common::browser_json(&handlers::load_meta_dir(&state));
    let listed = listing["error"].to_string();
    assert!(
        listed.contains(&format!("{RUN}/garbage.vis.db")),
        "{listed}"
    );
    for root in &absolute {
        assert!(!error.contains(root.as_str()), "{error}");
        assert!(!listed.contains(root.as_str()), "{listed}");
    }
}

/// Regression (issue 42, item 12): a step, rank or micro step the file does not hold got
/// msprobe's generic "metaData" error only; it keeps that text and names what is missing and
/// what the file holds.
#[test]
fn a_step_the_file_does_not_hold_is_named() {
    let (_dir, state, _) = served();
    let ask = |step: i32, rank: i32, micro: i32| {
        let mut m = meta(RUN, TAG);
        (m.step, m.rank, m.micro_step) = (Some(step), Some(rank), Some(micro));
        handlers::load_graph_all_node_list(&state, meta_request(&m))
            .error
            .unwrap_or_default()
    };
    let generic =
        "The query parameter “metaData” and its sub-items must exist and must be a dictionary.";
    for (error, named) in [
        (ask(7, 0, -1), "holds no step 7 (its steps: 0)"),
        (ask(0, 3, -1), "holds no rank 3 (its ranks: 0)"),
        (ask(0, 0, 5), "holds no micro step 5"),
    ] {
        assert!(error.starts_with(generic), "{error}");
        assert!(
            error.contains(&format!("{TAG}.vis.db of run \"{RUN}\"")),
            "{error}"
        );
        assert!(error.contains(named), "{error}");
    }
    assert_eq!(ask(0, 0, -1), "", "the file's own step and rank are served");
}

#[test]
fn an_expansion_that_names_no_node_says_so() {
    let (_dir, state, _) = served();
    let answer = handlers::change_node_expand_state(
        &state,
        "client",
        pb::NodeRequest {
            node_info: None,
            meta_data: Some(meta(RUN, TAG)),
            client_id: "client".into(),
        },
    );
    assert_eq!(
        answer.error.as_deref(),
        Some("node expand or collapse error the request names no node")
    );
}

/// Saving the matches where a link stands says which file and why (it was "Failed to save the
/// matched relations." alone, the reason only in TensorBoard's log).
#[test]
fn saving_the_matches_over_a_link_names_the_file_and_the_reason() {
    let (dir, state, _) = served();
    let target = dir.path().join("elsewhere.json");
    std::fs::write(&target, "{}").expect("write");
    let dest = dir.path().join(RUN).join(format!("{TAG}_0_0.vis.config"));
    std::os::unix::fs::symlink(&target, &dest).expect("symlink");
    let saved = handlers::save_matched_relations(&state, meta_request(&meta(RUN, TAG)));
    assert!(!saved.success);
    let error = saved.error.unwrap_or_default();
    assert!(
        error.starts_with("Failed to save the matched relations."),
        "{error}"
    );
    assert!(error.contains(&dest.display().to_string()), "{error}");
    assert!(error.contains("symbolic link"), "{error}");
    assert_eq!(std::fs::read_to_string(&target).expect("read"), "{}");
}
