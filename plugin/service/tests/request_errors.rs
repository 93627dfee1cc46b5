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
/// listing's error for it (the file and what is wrong with it).
#[test]
fn a_file_that_cannot_be_served_is_named_with_the_reason() {
    let (dir, state, _) = served();
    let absent = handlers::load_graph_config_info(&state, meta_request(&meta(RUN, "nope")));
    let error = absent.error.unwrap_or_default();
    assert!(
        error.starts_with("The database file could not be opened."),
        "{error}"
    );
    assert!(error.contains("nope.vis.db"), "{error}");
    assert!(error.contains(&dir.path().display().to_string()), "{error}");

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
    assert!(error.contains(&garbage.display().to_string()), "{error}");
    assert!(!error.contains("holds no"), "the listing's reason: {error}");
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
