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

/// Regression (issue 42, item 11): a folder named in GBK and a file named in Latin-1 were left
/// out of the listing silently. Each `.vis.db` whose path below the logdir is not UTF-8 is
/// listed as an error naming it (its bytes shown as `\xNN`) and saying how to fix it; a request
/// for the name the listing shows answers that error; the other files are served as before.
#[test]
fn files_with_names_that_are_not_utf8_are_listed_as_errors() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let (dir, state) = logdir_with("build_mlp_step0");
    let good = std::fs::read_dir(dir.path().join("run"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    // "模型" in GBK (not UTF-8), holding a file named in UTF-8.
    let gbk = dir.path().join(OsStr::from_bytes(b"\xc4\xa3\xd0\xcd"));
    std::fs::create_dir(&gbk).unwrap();
    std::fs::copy(&good, gbk.join("model.vis.db")).unwrap();
    // "café.vis.db" in Latin-1, in a UTF-8 folder.
    std::fs::copy(
        &good,
        dir.path()
            .join("run")
            .join(OsStr::from_bytes(b"caf\xe9.vis.db")),
    )
    .unwrap();

    let probe = Probe::new(state);
    let listing = probe.load_meta_dir();
    let runs = listing["data"].as_object().unwrap();
    assert_eq!(runs.keys().collect::<Vec<_>>(), ["run"], "{listing}");
    assert_eq!(
        runs["run"]["tags"].as_array().unwrap().len(),
        1,
        "{listing}"
    );
    let errors = listing["error"].as_array().unwrap();
    assert_eq!(errors.len(), 2, "{errors:?}");
    let find = |shown: &str| {
        errors
            .iter()
            .find(|e| e["info"].as_str().unwrap().contains(shown))
            .unwrap_or_else(|| panic!("{shown} in {errors:?}"))
    };
    let folder = find("\\xD0\\xCD/model.vis.db");
    let file = find("run/caf\\xE9.vis.db");
    for e in [folder, file] {
        let info = e["info"].as_str().unwrap();
        assert!(info.starts_with("Error: "), "{info}");
        assert!(
            info.contains("not UTF-8") && info.contains("rename"),
            "{info}"
        );
        assert!(!info.contains(&dir.path().display().to_string()), "{info}");
        // A request naming what the listing shows answers that error.
        let m = meta(e["run"].as_str().unwrap(), e["tag"].as_str().unwrap());
        let answer = probe.config(&m);
        assert_eq!(answer["success"], false, "{answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains("not UTF-8"), "{error}");
    }
    assert_eq!(file["run"], "run");
    assert_eq!(file["tag"], "caf\u{FFFD}");
    assert_eq!(folder["tag"], "model");
    // The good file still answers.
    let tag = runs["run"]["tags"][0].as_str().unwrap();
    assert_eq!(probe.config(&meta("run", tag))["success"], true);
}
