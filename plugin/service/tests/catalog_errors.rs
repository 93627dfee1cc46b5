//! Bad files in the logdir are listed as errors naming the file; the good ones keep working.

mod common;

use std::os::unix::fs::symlink;

use common::{logdir_with, meta, unpack, Probe};

#[test]
fn bad_files_are_listed_with_reasons_and_good_files_still_work() {
    let (dir, state) = logdir_with("build_mlp_step0");
    let bad = dir.path().join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    // Not SQLite at all.
    std::fs::write(bad.join("garbage.vis.db"), b"this is not a database").unwrap();
    // A real file cut in half, as a crash mid-copy leaves it.
    let good = unpack("compare_tf_stats", dir.path(), "scratch");
    let bytes = std::fs::read(&good).unwrap();
    std::fs::write(bad.join("truncated.vis.db"), &bytes[..bytes.len() / 2]).unwrap();
    std::fs::remove_dir_all(dir.path().join("scratch")).unwrap();
    // SQLite, but not msprobe's schema.
    {
        let conn = rusqlite::Connection::open(bad.join("other.vis.db")).unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")
            .unwrap();
    }
    // A folder and a dangling link with the suffix.
    std::fs::create_dir(bad.join("folder.vis.db")).unwrap();
    symlink(bad.join("nowhere"), bad.join("dangling.vis.db")).unwrap();

    let probe = Probe::new(state);
    // Just written, they may still be growing (a copy under way): held back, not reported...
    let early = probe.load_meta_dir();
    let early: Vec<&str> = early["error"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["tag"].as_str().unwrap())
        .collect();
    assert_eq!(early, ["dangling"], "only what cannot even be looked at");
    // ...until their size and time stayed the same for a second.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let listing = probe.load_meta_dir();
    let errors = listing["error"].as_array().unwrap();
    let tags: Vec<&str> = errors.iter().map(|e| e["tag"].as_str().unwrap()).collect();
    for tag in ["garbage", "truncated", "other", "folder", "dangling"] {
        assert!(tags.contains(&tag), "{tag} not reported in {errors:?}");
    }
    for e in errors {
        assert_eq!(e["run"], "bad");
        let info = e["info"].as_str().unwrap();
        assert!(
            info.contains(e["tag"].as_str().unwrap()),
            "the reason names the file: {info}"
        );
    }
    let other = errors.iter().find(|e| e["tag"] == "other").unwrap();
    assert!(other["info"]
        .as_str()
        .unwrap()
        .contains("tb_nodes is missing"));

    // The good file is listed and answers.
    let runs = listing["data"].as_object().unwrap();
    assert_eq!(runs.keys().collect::<Vec<_>>(), ["run"]);
    let tag = runs["run"]["tags"][0].as_str().unwrap();
    let root = probe.expand(&meta("run", tag), "root", "Single");
    assert_eq!(root["success"], true);
    assert!(root["data"].as_object().unwrap().len() > 1);
}

#[test]
fn every_file_of_a_folder_is_listed() {
    let (dir, state) = logdir_with("build_mlp_step0");
    unpack("build_tf_stats", dir.path(), "run");
    let listing = Probe::new(state).load_meta_dir();
    assert_eq!(listing["data"]["run"]["tags"].as_array().unwrap().len(), 2);
}
