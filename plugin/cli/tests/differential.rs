//! Generated cases against msprobe's own output, offline (no torch, no live msprobe).
//!
//! `tests/differential/cases/seed_<N>/` holds a case made by `tests/differential/gen_case.py` from
//! seed N: the dump folders, `case.json` (the `msprobe graph_visualize` options and the pinned
//! oracle versions) and what msprobe 26.2.0 wrote for it (`msprobe.vis.db.xz`; for `--file_type
//! json`, its JSON files as one document, `msprobe.json.xz`), or, when msprobe refused the input,
//! its error in `case.json` (`msprobe_error`). `tests/differential/freeze.py`
//! makes them; `make test-differential` runs the live oracle on new seeds.
//!
//! This test runs our binary on every case with the same options and compares the result with
//! msprobe's node by node (`visdb::diff`), or file by file and value by value for JSON outputs (as
//! `tests/differential/driver.py`'s `json_value_diff` does). The cases that do not agree yet are listed in
//! `tests/differential/known_differences.json` with the rule each one hits and its count of
//! differing lines; the test asserts exactly that list, so it fails both when a new difference
//! appears and when a known one is fixed (then the entry is removed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use graph_ascend_visdb::diff::{diff_files, DiffOptions};
use serde_json::Value;

fn differential_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/differential")
}

/// How our run of one case compares with msprobe's.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// Both wrote a file and the files are equal, or both refused the input.
    Agree,
    /// Both wrote a file; this many differing lines.
    Different(usize),
    /// msprobe wrote a file, we refused the input.
    OursRefused,
    /// msprobe refused the input, we wrote a file.
    OursAccepted,
}

impl Outcome {
    fn key(&self) -> (String, usize) {
        match self {
            Outcome::Agree => ("agree".into(), 0),
            Outcome::Different(n) => ("different".into(), *n),
            Outcome::OursRefused => ("ours_refused".into(), 0),
            Outcome::OursAccepted => ("ours_accepted_msprobe_refused".into(), 0),
        }
    }
}

/// The decompressed bytes of the `.xz` file `xz` written to `out`.
fn unxz(xz: &Path, out: &mut impl std::io::Write) {
    let file = std::fs::File::open(xz).unwrap_or_else(|e| panic!("{}: {e}", xz.display()));
    lzma_rs::xz_decompress(&mut std::io::BufReader::new(file), out)
        .unwrap_or_else(|e| panic!("{}: {e}", xz.display()));
}

fn decompress(xz: &Path, into: &Path) -> PathBuf {
    let out_path = into.join("msprobe.vis.db");
    let mut out = std::fs::File::create(&out_path).unwrap();
    unxz(xz, &mut out);
    out_path
}

/// The `.json` files under `dir`, by their path relative to it (`/`-separated), in path order.
fn json_output(dir: &Path) -> serde_json::Map<String, Value> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let entries = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                if let Ok(rel) = p.strip_prefix(dir) {
                    files.push((rel.to_string_lossy().replace('\\', "/"), p));
                }
            }
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|(rel, p)| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let value = graph_ascend_visdb::json::parse_lenient(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
                .unwrap_or(Value::Null);
            (rel, value)
        })
        .collect()
}

/// The differences of two JSON values as lines, as `driver.py`'s `json_value_diff` finds them:
/// keys in another order, keys or items on one side only, numbers of one type that differ by
/// more than 1e-6 relatively, anything else not equal (or of another type).
fn json_value_diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            if a.len() == b.len() && a.keys().all(|k| b.contains_key(k)) && !a.keys().eq(b.keys()) {
                out.push(format!("{path}: key order differs"));
            }
            for (k, x) in a {
                match b.get(k) {
                    None => out.push(format!("{path}.{k}: only in left (ours)")),
                    Some(y) => json_value_diff(&format!("{path}.{k}"), x, y, out),
                }
            }
            for k in b.keys().filter(|k| !a.contains_key(*k)) {
                out.push(format!("{path}.{k}: only in right (msprobe)"));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                out.push(format!("{path}: length {} / {}", a.len(), b.len()));
            }
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                json_value_diff(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (Value::Number(x), Value::Number(y)) if x.is_f64() == y.is_f64() => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            let both_nan = x.is_nan() && y.is_nan();
            if x != y && !both_nan && (x - y).abs() > 1e-6 * x.abs().max(y.abs()) {
                out.push(format!("{path}: left {x} / right {y}"));
            }
        }
        _ => {
            if a != b {
                out.push(format!("{path}: left {a} / right {b}"));
            }
        }
    }
}

/// Our `--file_type json` output (`mine`, [`json_output`]) against msprobe's (the document of
/// `msprobe.json.xz`).
fn diff_json_outputs(mine: &serde_json::Map<String, Value>, theirs_xz: &Path) -> Vec<String> {
    let mut text = Vec::new();
    unxz(theirs_xz, &mut text);
    let theirs = match std::str::from_utf8(&text).map(graph_ascend_visdb::json::parse_lenient) {
        Ok(Ok(Some(Value::Object(theirs)))) => theirs,
        _ => panic!("{}: not a JSON object", theirs_xz.display()),
    };
    let mut lines = Vec::new();
    for f in mine.keys().filter(|f| !theirs.contains_key(*f)) {
        lines.push(format!("{f}: only in left (ours)"));
    }
    for f in theirs.keys().filter(|f| !mine.contains_key(*f)) {
        lines.push(format!("{f}: only in right (msprobe)"));
    }
    for (f, a) in mine {
        if let Some(b) = theirs.get(f) {
            json_value_diff(f, a, b, &mut lines);
        }
    }
    lines
}

fn run_case(dir: &Path) -> (Outcome, Vec<String>) {
    let case: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).unwrap()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("ours");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_graph-ascend"));
    cmd.arg("convert")
        .arg("-tp")
        .arg(dir.join(case["target"].as_str().unwrap()));
    if let Some(golden) = case["golden"].as_str() {
        cmd.arg("-gp").arg(dir.join(golden));
    }
    for opt in case["options"].as_array().unwrap() {
        let opt = opt.as_str().unwrap();
        // A `-lm` YAML mapping is a file of the case.
        if opt.ends_with(".yaml") {
            cmd.arg(dir.join(opt));
        } else {
            cmd.arg(opt);
        }
    }
    cmd.arg("-o").arg(&out);
    let run = cmd.output().unwrap();
    let theirs_json = dir.join("msprobe.json.xz");
    if theirs_json.exists() {
        if !run.status.success() {
            return (
                Outcome::OursRefused,
                vec![String::from_utf8_lossy(&run.stderr).into_owned()],
            );
        }
        let mine = json_output(&out);
        assert!(
            !mine.is_empty(),
            "{}: convert --file_type json wrote no .json file",
            dir.display()
        );
        let lines = diff_json_outputs(&mine, &theirs_json);
        return if lines.is_empty() {
            (Outcome::Agree, vec![])
        } else {
            (Outcome::Different(lines.len()), lines)
        };
    }
    let ours = run.status.success().then(|| {
        std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(".vis.db"))
            .expect("convert succeeded without writing a .vis.db")
    });
    let theirs = dir.join("msprobe.vis.db.xz");
    match (ours, theirs.exists()) {
        (None, false) => (Outcome::Agree, vec![]),
        (Some(_), false) => (
            Outcome::OursAccepted,
            vec![format!(
                "msprobe: {}",
                case["msprobe_error"].as_str().unwrap_or("")
            )],
        ),
        (None, true) => (
            Outcome::OursRefused,
            vec![String::from_utf8_lossy(&run.stderr).into_owned()],
        ),
        (Some(ours), true) => {
            let theirs = decompress(&theirs, tmp.path());
            let opts = DiffOptions {
                // msprobe writes the absolute tensor folder of the machine it ran on
                ignore_columns: &["dump_data_dir"],
                ..Default::default()
            };
            let report = diff_files(&ours, &theirs, opts).unwrap();
            if report.is_equal() {
                (Outcome::Agree, vec![])
            } else {
                (Outcome::Different(report.total), report.differences)
            }
        }
    }
}

#[test]
fn generated_cases_match_msprobe_except_the_known_differences() {
    let dir = differential_dir();
    let known: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("known_differences.json")).unwrap())
            .unwrap();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir.join("cases"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("case.json").exists())
        .collect();
    cases.sort();
    assert!(cases.len() >= 10, "too few frozen cases: {}", cases.len());

    let mut seen: BTreeMap<String, (String, usize)> = BTreeMap::new();
    let mut details = String::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let (outcome, lines) = run_case(case);
        if outcome != Outcome::Agree {
            let (kind, n) = outcome.key();
            details.push_str(&format!("{name}: {kind} ({n})\n"));
            for l in lines.iter().take(5) {
                details.push_str(&format!("    {l}\n"));
            }
            seen.insert(name, (kind, n));
        }
    }
    let expected: BTreeMap<String, (String, usize)> = known
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                (
                    v["outcome"].as_str().unwrap().to_string(),
                    v["differences"].as_u64().unwrap() as usize,
                ),
            )
        })
        .collect();
    for name in expected.keys() {
        assert!(
            dir.join("cases").join(name).is_dir(),
            "known_differences.json lists {name}, which is not a case"
        );
    }
    assert_eq!(
        seen, expected,
        "the cases that differ from msprobe are not the known ones \
         (tests/differential/known_differences.json); ours now:\n{details}"
    );
}
