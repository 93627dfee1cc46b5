//! `graph-ascend precheck` on real msprobe tensor dumps (tests/fixtures/replay/): text and JSON,
//! both runs, the `--api` filter, exit status 1 when a call fails, 2 on an error.

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/replay")
        .join(name)
}

fn precheck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graph-ascend"))
        .arg("precheck")
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_correct_run_passes_with_its_counts() {
    let a = fixture("tf_small_a");
    let o = precheck(&[a.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o),
        String::from_utf8_lossy(&o.stderr)
    );
    let t = text(&o);
    assert!(
        t.contains("9 API calls (forward), 9 replayed: 9 pass, 0 fail"),
        "{t}"
    );
    assert!(t.contains("a module's record"), "{t}");
    assert!(!t.contains("FAIL"), "{t}");
}

#[test]
fn the_faulty_call_fails_in_text_and_json() {
    let (faulty, golden) = (fixture("tf_small_a_faulty"), fixture("tf_small_b"));
    let o = precheck(&[
        "-tp",
        faulty.to_str().unwrap(),
        "-gp",
        golden.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let t = text(&o);
    assert!(t.contains("FAIL Tensor.__add__.0.forward"), "{t}");
    assert!(t.contains("golden:"), "{t}");
    assert_eq!(t.matches("FAIL").count(), 1, "{t}");

    let o = precheck(&["-tp", faulty.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let run = &doc["runs"][0];
    assert_eq!(run["summary"]["fail"], 1);
    let add = run["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "Tensor.__add__.0.forward")
        .unwrap();
    assert_eq!(add["status"], "fail");
    assert_eq!(add["outputs"][0]["msprobe"]["status"], "pass");
    assert!(add["outputs"][0]["ours"]["max_ulp"].as_f64().unwrap() >= 3.0);
}

#[test]
fn the_api_filter_keeps_the_named_calls() {
    let a = fixture("tf_small_a_faulty");
    let o = precheck(&[a.to_str().unwrap(), "--api", "softmax", "--json"]);
    assert_eq!(o.status.code(), Some(0), "the faulty add is filtered out");
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let calls = doc["runs"][0]["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["name"], "Functional.softmax.0.forward");
}

#[test]
fn errors_name_the_folder() {
    let o = precheck(&["/nonexistent/dump"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/dump"));
}

/// Copies a fixture dump into `dir` and gives its rank folder the `construct.json` (every API
/// call at the top) and `stack.json` a conversion needs: the replay fixtures hold the dumps'
/// `dump.json` and tensors only.
fn convertible_copy(name: &str, dir: &std::path::Path) -> PathBuf {
    let to = dir.join(name);
    copy_dir(&fixture(name), &to);
    let rank = std::fs::read_dir(to.join("step0"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let dump: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rank.join("dump.json")).unwrap()).unwrap();
    let construct: serde_json::Map<String, serde_json::Value> = dump["data"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| !k.starts_with("Module"))
        .map(|k| (k.clone(), serde_json::Value::Null))
        .collect();
    std::fs::write(
        rank.join("construct.json"),
        serde_json::to_vec(&construct).unwrap(),
    )
    .unwrap();
    std::fs::write(rank.join("stack.json"), "{}").unwrap();
    to
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A compare `.vis.db` converted from the faulty target and the golden run in `root/made`,
/// whose dumps are then moved to `root/moved` (the file records the old absolute paths).
fn moved_compare(root: &std::path::Path) -> PathBuf {
    let made = root.join("made");
    let target = convertible_copy("tf_small_a_faulty", &made);
    let golden = convertible_copy("tf_small_b", &made);
    let out = root.join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_graph-ascend"))
        .arg("convert")
        .args(["-tp", target.to_str().unwrap()])
        .args(["-gp", golden.to_str().unwrap()])
        .args(["-o", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::rename(&made, root.join("moved")).unwrap();
    std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".vis.db"))
        .unwrap()
}

#[test]
fn a_compare_visdb_replays_both_runs_from_relocated_dumps() {
    let root = tempfile::tempdir().unwrap();
    let db = moved_compare(root.path());
    let db = db.to_str().unwrap();

    // The recorded paths are gone: the error names the place and the way out.
    let o = precheck(&[db]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--dump-root"), "{err}");
    assert!(err.contains("made"), "{err}");

    let roots = format!(
        "{}={}",
        root.path().join("made").display(),
        root.path().join("moved").display()
    );
    let o = precheck(&[db, "--dump-root", &roots]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let t = text(&o);
    assert!(t.contains("target: "), "{t}");
    assert!(t.contains("moved"), "{t}");
    assert!(
        t.contains("9 API calls (forward), 9 replayed: 8 pass, 1 fail"),
        "{t}"
    );
    assert!(t.contains("golden: "), "{t}");
    assert!(
        t.contains("4 API calls (forward), 4 replayed: 4 pass, 0 fail"),
        "{t}"
    );
    assert!(t.contains("FAIL Tensor.__add__.0.forward"), "{t}");
    // The failing call with its golden partner's verdict beside it.
    assert!(t.contains("golden Tensor.__add__.0.forward: pass"), "{t}");
    assert_eq!(t.matches("FAIL").count(), 1, "{t}");

    let o = precheck(&[db, "--dump-root", &roots, "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let pairs = doc["pairs"].as_array().unwrap();
    let add = pairs
        .iter()
        .find(|p| p["target"] == "Tensor.__add__.0.forward")
        .unwrap();
    assert_eq!(add["golden"], "Tensor.__add__.0.forward");
    assert_eq!(add["target_status"], "fail");
    assert_eq!(add["golden_status"], "pass");
    // The target's calls the golden slice has not (embedding, …) pair with nothing.
    let embedding = pairs
        .iter()
        .find(|p| p["target"] == "Functional.embedding.0.forward")
        .unwrap();
    assert!(embedding["golden"].is_null());
    assert_eq!(pairs.len(), 9);
}

/// The committed header rows of msprobe 26.2's files, extracted from the wheel by
/// `plugin/replay/tests/oracle/extract_msprobe_csv_columns.py` (msprobe's own `Comparator`
/// writes them).
fn msprobe_columns() -> serde_json::Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../replay/tests/oracle/msprobe_csv_columns.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// RFC 4180 rows (quoted fields with `""`, CR LF ends) of a CSV text.
fn csv_rows(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    rows
}

fn one_file(dir: &std::path::Path, prefix: &str) -> String {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(prefix) && n.ends_with(".csv")
        })
        .collect();
    assert_eq!(files.len(), 1, "{prefix} in {}", dir.display());
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    let stamp = &name[prefix.len()..name.len() - 4];
    assert!(
        stamp.len() == 14 && stamp.bytes().all(|b| b.is_ascii_digit()),
        "{name}"
    );
    String::from_utf8(std::fs::read(&files[0]).unwrap()).unwrap()
}

#[test]
fn msprobe_csv_files_have_msprobes_columns_and_ours_are_apart() {
    let (faulty, golden) = (fixture("tf_small_a_faulty"), fixture("tf_small_b"));
    let out = tempfile::tempdir().unwrap();
    let o = precheck(&[
        "-tp",
        faulty.to_str().unwrap(),
        "-gp",
        golden.to_str().unwrap(),
        "-o",
        out.path().to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let want = msprobe_columns();
    assert_eq!(want["msprobe"], "26.2.0");
    assert_eq!(want["encoding"], "utf-8-sig");
    assert_eq!(want["line_end"], "\\r\\n");
    for (role, calls) in [("target", 9), ("golden", 4)] {
        let dir = out.path().join(role);
        for (prefix, key, rows) in [
            (
                "accuracy_checking_result_",
                "accuracy_checking_result",
                calls,
            ),
            (
                "accuracy_checking_details_",
                "accuracy_checking_details",
                calls,
            ),
        ] {
            let text = one_file(&dir, prefix);
            let body = text
                .strip_prefix('\u{feff}')
                .expect("a byte-order mark, as utf-8-sig");
            assert!(body.ends_with("\r\n") && !body.replace("\r\n", "").contains("\r"));
            let rows_read = csv_rows(body);
            let header: Vec<&str> = want[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap())
                .collect();
            assert_eq!(rows_read[0], header, "{role} {key}");
            // Every call has its row (one output each here), never an extra column (msprobe
            // writes a call it ran as three cells of the result file, its message only for a
            // skipped one).
            assert_eq!(rows_read.len(), 1 + rows, "{role} {key}:\n{body}");
            for r in &rows_read {
                assert!(r.len() <= header.len(), "{role} {key}: {r:?}");
                if key == "accuracy_checking_details" {
                    assert_eq!(r.len(), header.len(), "{role} {key}: {r:?}");
                }
            }
        }
    }
    // msprobe's stage 1 passes the faulty add; ours fails it, in our own file.
    let result = csv_rows(
        one_file(&out.path().join("target"), "accuracy_checking_result_")
            .trim_start_matches('\u{feff}'),
    );
    let add = result.iter().find(|r| r[0] == "Tensor.__add__.0").unwrap();
    assert_eq!(add[1], "pass");
    let details = csv_rows(
        one_file(&out.path().join("target"), "accuracy_checking_details_")
            .trim_start_matches('\u{feff}'),
    );
    let add = details
        .iter()
        .find(|r| r[0] == "Tensor.__add__.0.forward.output.0")
        .unwrap();
    assert_eq!(
        (add[1].as_str(), add[2].as_str(), add[3].as_str()),
        ("torch.float64", "torch.float32", "(2, 16, 16)")
    );
    let ours =
        csv_rows(one_file(out.path(), "graph_ascend_precheck_").trim_start_matches('\u{feff}'));
    let col = |name: &str| ours[0].iter().position(|c| c == name).unwrap();
    let add = ours
        .iter()
        .find(|r| r[col("Target Call")] == "Tensor.__add__.0.forward")
        .unwrap();
    assert_eq!(add[col("Target Status")], "fail");
    assert_eq!(add[col("Target msprobe Status")], "pass");
    assert_eq!(add[col("Golden Call")], "Tensor.__add__.0.forward");
    assert_eq!(add[col("Golden Status")], "pass");
    assert!(add[col("Target Max ULP")].parse::<f64>().unwrap() >= 3.0);
    assert_eq!(
        ours.len(),
        1 + 9,
        "one row per target call (the golden's all pair)"
    );
}

#[test]
fn the_api_glob_workers_and_progress() {
    let a = fixture("tf_small_a_faulty");
    let a = a.to_str().unwrap();
    let names = |o: &Output| -> Vec<String> {
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        doc["runs"][0]["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    // A glob matches the whole name: `Functional.*.forward` is every functional forward call,
    // not the linear's backward record nor the Tensor/Torch calls.
    let o = precheck(&[
        a,
        "--api",
        "Functional.*.forward",
        "--workers",
        "1",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "the faulty add is filtered out");
    let got = names(&o);
    assert!(
        got.iter()
            .all(|n| n.starts_with("Functional.") && n.ends_with(".forward")),
        "{got:?}"
    );
    assert_eq!(got.len(), 6, "{got:?}");
    // A substring matches anywhere.
    let o = precheck(&[a, "--api", "__add__", "--workers", "2", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(names(&o), ["Tensor.__add__.0.forward"]);
    // --progress on a pipe: lines that count up to the total.
    let o = precheck(&[a, "--progress"]);
    let err = String::from_utf8_lossy(&o.stderr);
    let counts: Vec<(usize, usize)> = err
        .lines()
        .filter_map(|l| l.strip_prefix("target: ")?.strip_suffix(" records"))
        .filter_map(|c| {
            let (d, t) = c.split_once('/')?;
            Some((d.parse().ok()?, t.parse().ok()?))
        })
        .collect();
    let total = counts.last().unwrap().1;
    assert_eq!(counts.last().unwrap().0, total, "{err}");
    assert!(total >= 10, "{err}");
    let o = precheck(&[a, "--workers", "0x"]);
    assert_eq!(o.status.code(), Some(2));
}

/// The rows msprobe's own `Comparator` writes for three calls of the faulty dump
/// (`plugin/replay/tests/oracle/make_msprobe_csv_rows.py`, torch's float64 bench), cell for cell
/// in ours: names, dtypes, the shape, every number as msprobe formats it, the blanks, the status
/// and the message.
#[test]
fn msprobe_csv_rows_equal_msprobes_own() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../replay/tests/oracle/msprobe_csv_rows.json");
    let want: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let faulty = fixture("tf_small_a_faulty");
    let o = precheck(&[faulty.to_str().unwrap(), "-o", out.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    for (prefix, key) in [
        ("accuracy_checking_result_", "accuracy_checking_result"),
        ("accuracy_checking_details_", "accuracy_checking_details"),
    ] {
        let ours = csv_rows(one_file(out.path(), prefix).trim_start_matches('\u{feff}'));
        let theirs = want[key].as_array().unwrap();
        assert_eq!(theirs.len(), 3);
        for row in theirs {
            let row: Vec<&str> = row
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap())
                .collect();
            let mine = ours
                .iter()
                .find(|r| r[0] == row[0])
                .unwrap_or_else(|| panic!("{key}: no row {}", row[0]));
            assert_eq!(mine, &row, "{key}");
        }
    }
}
