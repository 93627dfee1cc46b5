//! Reads racing edits in one sidecar (issue 42, item 2): the pooled readers open a file
//! `immutable`, so nothing but the file's gate (`edit_gate`) keeps them off the pages a large
//! edit writes (its cache spills, its commit, a WAL checkpoint). Reader threads ask the file
//! through the catalog's handles (as requests do) while edits rewrite every target node, again
//! and again; every answer must be the file before an edit or after it, whole, and no read may
//! fail ("database disk image is malformed" was seen on 2 of about 118,000 reads).
//!
//! `TORN_RACE_SECONDS` (default 2, the slice of `make test`; `make test-torn` runs longer) per
//! journal mode: our files' (rollback journal) and msprobe's (WAL).

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use graph_ascend_service::{handlers, State};
use graph_ascend_visdb::store::{GraphKey, MatchUpdate, Side};
use graph_ascend_visdb::Store;

use common::unpack;

const NPU: GraphKey = GraphKey {
    side: Side::Npu,
    step: 0,
    rank: 0,
};

/// One answer: the distinct links of the target graph's nodes and the data of its first and
/// last node (two queries on one reader, as a request makes).
fn answer(store: &Store, first: &str, last: &str) -> Result<String, String> {
    let links = store.match_links(NPU, -1).map_err(|e| e.to_string())?;
    let distinct: BTreeSet<String> = links.into_iter().filter_map(|(_, l)| l).collect();
    let data = |name: &str| {
        store
            .node_detail(NPU, name)
            .map_err(|e| e.to_string())
            .map(|d| d.map(|d| d.input_data.to_string().len()).unwrap_or(0))
    };
    let sizes = (data(first)?, data(last)?);
    let head = |name: &str| {
        store
            .node_detail(NPU, name)
            .map_err(|e| e.to_string())
            .map(|d| {
                d.map(|d| {
                    d.input_data
                        .to_string()
                        .chars()
                        .take(12)
                        .collect::<String>()
                })
            })
    };
    Ok(format!(
        "{distinct:?} {sizes:?} {:?} {:?}",
        head(first)?,
        head(last)?
    ))
}

/// The large edit: every target node's link and input data rewritten to `version` (about 12 MB
/// in all, more than a connection's 8 MB page cache, so SQLite spills before the commit).
fn edit(state: &State, tag: &str, names: &[String], version: u32) {
    let file = state.catalog.file("run", tag).expect("the file");
    let fill = char::from(b'A' + u8::try_from(version % 26).unwrap_or(0));
    let per_node = ((12 << 20) / names.len().max(1)).clamp(1_000, 1 << 20);
    let data = format!("{{\"v\": \"{}\"}}", fill.to_string().repeat(per_node));
    file.with_writable_store(|s| {
        s.write(|s| {
            for name in names {
                s.update_match(&MatchUpdate {
                    graph: NPU,
                    name: name.clone(),
                    matched_node_link: format!("[\"v{version}\"]"),
                    input_data: data.clone(),
                    output_data: "{}".into(),
                    precision_index: None,
                })?;
            }
            Ok(())
        })
    })
    .expect("edit");
}

fn race(wal: bool) {
    let seconds: u64 = std::env::var("TORN_RACE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = unpack("compare_tf_stats", dir.path(), "run");
    if !wal {
        let conn = rusqlite::Connection::open(&path).expect("open");
        let mode: String = conn
            .query_row("PRAGMA journal_mode=delete", [], |r| r.get(0))
            .expect("rollback-journal mode");
        assert_eq!(mode, "delete");
    }
    let tag = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".vis.db"))
        .expect("tag")
        .to_owned();
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    handlers::load_meta_dir(&state);
    let file = state.catalog.file("run", &tag).expect("the file");
    let names: Vec<String> = file
        .with_store(|s| s.match_links(NPU, -1))
        .expect("names")
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let (first, last) = (names[0].clone(), names[names.len() - 1].clone());
    drop(file);
    let ask = {
        let tag = tag.clone();
        move |state: &State| {
            let Some(file) = state.catalog.file("run", &tag) else {
                return Err("the file is not served".to_owned());
            };
            file.with_store(|s| Ok(answer(s, &first, &last)))
                .unwrap_or_else(|e| Err(e.to_string()))
        }
    };
    // The states the race may show: after an edit to version 0, or to version 1.
    edit(&state, &tag, &names, 0);
    let zero = ask(&state).expect("answer");
    edit(&state, &tag, &names, 1);
    let one = ask(&state).expect("answer");
    assert_ne!(zero, one);
    let valid = [zero, one];

    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (state, stop, answers, valid) =
                (state.clone(), stop.clone(), answers.clone(), valid.clone());
            let ask = ask.clone();
            std::thread::spawn(move || {
                let mut wrong = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let got = ask(&state);
                    answers.fetch_add(1, Ordering::Relaxed);
                    match got {
                        Ok(a) if valid.contains(&a) => {}
                        other => wrong.push(format!("{other:?}")),
                    }
                }
                wrong
            })
        })
        .collect();
    let started = Instant::now();
    let mut edits = 0u32;
    while started.elapsed() < Duration::from_secs(seconds) {
        edit(&state, &tag, &names, edits % 2);
        edits += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let wrong: Vec<String> = readers
        .into_iter()
        .flat_map(|r| r.join().expect("reader"))
        .collect();
    let answered = answers.load(Ordering::Relaxed);
    let mode = if wal { "WAL" } else { "rollback-journal" };
    eprintln!(
        "{mode} mode: {edits} edits, {answered} answers, {} wrong or failed",
        wrong.len()
    );
    assert!(
        wrong.is_empty(),
        "{} of {answered} answers wrong or failed during {edits} edits, first: {}",
        wrong.len(),
        wrong[0]
    );
    // The race ran: edits and reads overlapped.
    assert!(
        edits >= 2 && answered > u64::from(edits),
        "{edits} edits, {answered} answers"
    );
}

#[test]
fn reads_racing_edits_of_our_files_see_before_or_after() {
    race(false);
}

#[test]
fn reads_racing_edits_of_msprobes_files_see_before_or_after() {
    race(true);
}
