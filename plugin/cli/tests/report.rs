//! `graph-ascend report`, run as the user runs it: the self-contained HTML report (docs/report.md).
//! The page's build is a stand-in here (the browser test, tests/e2e/report.test.mjs, opens the real
//! one); what is checked is the data embedded, its escaping, and the command's promises.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

mod common;
use common::{ga, unpack};

const EVIL: &str = "</script><script>alert(1)</script>";
const FIRST: &str = "Functional.layer_norm.3.forward";

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A stand-in for the page's build: index.html linking a script and a style sheet.
fn page_build(dir: &Path) -> PathBuf {
    let build = dir.join("static");
    std::fs::create_dir_all(build.join("assets")).unwrap();
    std::fs::write(
        build.join("index.html"),
        "<!doctype html><html><head><script type=\"module\" crossorigin src=\"./assets/app-x.js\"></script>\n\
         <link rel=\"stylesheet\" crossorigin href=\"./assets/app-x.css\"></head><body><div id=\"app\"></div></body></html>",
    )
    .unwrap();
    std::fs::write(build.join("assets/app-x.js"), "const page = '</script>';").unwrap();
    std::fs::write(build.join("assets/app-x.css"), "body{margin:0}").unwrap();
    build
}

fn report(db: &Path, out: &Path, build: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "report",
        db.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--assets",
        build.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    ga(&args)
}

/// The text of the element holding the report's data, and that data.
fn embedded(html: &str) -> (String, Value) {
    let open = "id=\"graph-ascend-report\">";
    let start = html.find(open).expect("the data element") + open.len();
    let len = html[start..].find("</script>").expect("its end");
    let text = html[start..start + len].to_owned();
    let data = serde_json::from_str(&text).expect("JSON");
    (text, data)
}

/// Every string of a JSON value.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.iter().for_each(|(k, x)| {
            out.push(k.clone());
            strings(x, out)
        }),
        _ => {}
    }
}

#[test]
fn holds_the_diagnosis_the_paths_to_sources_and_their_details() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_stats", dir.path());
    let build = page_build(dir.path());
    let out = dir.path().join("r.html");
    let run = report(&db, &out, &build, &[]);
    assert!(run.status.success(), "{}", stderr(&run));
    let html = std::fs::read_to_string(&out).unwrap();
    // The page's own script and styles, inlined, made unable to end their element.
    assert!(html.contains("const page = '\\x3C/script>';"));
    assert!(html.contains("body{margin:0}"));
    assert!(html.contains("connect-src 'none'"));
    let (_, data) = embedded(&html);
    assert_eq!(data["diagnosis"]["data"]["sources"][0]["node"], FIRST);
    let npu = &data["points"][0]["panes"]["NPU"];
    let keys: Vec<&str> = npu["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(keys.contains(&FIRST), "the first source is in a view");
    assert_eq!(npu["details"][FIRST]["id"], FIRST);
    // A view with the source's parent open (its path).
    let parent = "Module.layers.1.ln2.LayerNorm.forward.0";
    assert!(npu["views"].as_array().unwrap().iter().any(|v| v["open"]
        .as_array()
        .unwrap()
        .iter()
        .any(|o| o == parent)));
    let prov = &data["provenance"];
    assert_eq!(prov["steps"], serde_json::json!([0]));
    assert!(prov["tool"].as_str().unwrap().starts_with("graph-ascend "));
    assert!(prov["file"]
        .as_str()
        .unwrap()
        .ends_with("compare_tf_stats.vis.db"));
}

#[test]
fn names_from_the_file_stay_data() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_stats", dir.path());
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute(
            "UPDATE tb_nodes SET node_name = replace(node_name, ?1, ?2), up_node = replace(up_node, ?1, ?2), \
             sub_nodes = replace(sub_nodes, ?1, ?2), matched_node_link = replace(matched_node_link, ?1, ?2)",
            [FIRST, EVIL],
        )
        .unwrap();
    }
    let build = page_build(dir.path());
    let out = dir.path().join("r.html");
    let run = report(&db, &out, &build, &[]);
    assert!(run.status.success(), "{}", stderr(&run));
    let html = std::fs::read_to_string(&out).unwrap();
    let (text, data) = embedded(&html);
    assert!(!text.contains('<') && !text.contains('>') && !text.contains('&'));
    assert!(!html.contains(EVIL));
    assert!(text.contains("\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"));
    // The name itself is intact in the data: the page shows it as text.
    assert_eq!(data["diagnosis"]["data"]["sources"][0]["node"], EVIL);
    assert_eq!(
        data["points"][0]["panes"]["NPU"]["details"][EVIL]["id"],
        EVIL
    );
}

#[test]
fn never_replaces_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_stats", dir.path());
    let build = page_build(dir.path());
    let out = dir.path().join("r.html");
    std::fs::write(&out, "mine").unwrap();
    let run = report(&db, &out, &build, &[]);
    assert_eq!(run.status.code(), Some(2));
    assert!(stderr(&run).contains("exists"), "{}", stderr(&run));
    assert!(stderr(&run).contains("never replaces"), "{}", stderr(&run));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "mine");
}

/// What a report run left in its temp dir (`TMPDIR`) and beside its output: the names of the
/// entries, hidden ones included.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A report started with `TMPDIR=tmp`, held at `point` (`data`: its temporary folder made;
/// `write`: half of the file written under its temporary name) by the binary's test hook,
/// once it is there.
/// A held report, killed when dropped: a failing assertion must not leave it running (it holds
/// the test harness's output pipe, and the run then never ends).
struct Held(std::process::Child);

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for Held {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for Held {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

fn held_report(db: &Path, out: &Path, build: &Path, tmp: &Path, point: &str) -> Held {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_graph-ascend"))
        .args(["report", db.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .args(["--assets", build.to_str().unwrap()])
        .env("TMPDIR", tmp)
        .env("GRAPH_ASCEND_TEST_HOLD_REPORT", point)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start graph-ascend report");
    let out_dir = out.parent().unwrap();
    // Its names carry `.<pid>.` (after the host).
    let own = format!(".{}.", child.id());
    let reached = || match point {
        // Its folder holds the run's folder with the link to the file.
        "data" => std::fs::read_dir(tmp)
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with("graph-ascend-report-")
                    && name.contains(&own)
                    && std::fs::read_dir(e.path())
                        .map(|d| {
                            d.filter_map(|r| r.ok())
                                .any(|r| entries(&r.path()).len() == 1)
                        })
                        .unwrap_or(false)
            }),
        _ => std::fs::read_dir(out_dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.ends_with(".html.tmp")
                    && name.contains(&own)
                    && e.metadata().is_ok_and(|m| m.len() > 0)
            }),
    };
    let started = std::time::Instant::now();
    while !reached() {
        if let Some(status) = child.try_wait().expect("wait") {
            panic!("the report ended ({status}) before reaching {point}");
        }
        assert!(
            started.elapsed().as_secs() < 120,
            "the report never reached {point}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Held(child)
}

fn signal(child: &std::process::Child, name: &str) {
    let sent = std::process::Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
}

/// Regression (issue 42, item 4): `report -o` wrote into the named file itself, so Ctrl-C,
/// SIGTERM or SIGKILL left part of a report under the name (which the rerun then refused to
/// replace), and its temporary folder stayed in the temp dir. Real signals to a running
/// `graph-ascend report`, held by its test hook while computing and while writing.
#[test]
fn an_interrupted_report_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_stats", dir.path());
    let build = page_build(dir.path());
    let (tmp, out_dir) = (dir.path().join("tmp"), dir.path().join("out"));
    std::fs::create_dir(&tmp).unwrap();
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("r.html");
    for (point, name, code) in [
        ("data", "TERM", 143),
        ("write", "TERM", 143),
        ("data", "INT", 130),
        ("write", "INT", 130),
    ] {
        let mut child = held_report(&db, &out, &build, &tmp, point);
        signal(&child, name);
        let status = child.wait().expect("wait");
        assert_eq!(status.code(), Some(code), "SIG{name} at {point}");
        assert_eq!(
            entries(&tmp),
            Vec::<String>::new(),
            "SIG{name} at {point}: the temp dir"
        );
        assert_eq!(
            entries(&out_dir),
            Vec::<String>::new(),
            "SIG{name} at {point}: beside the output"
        );
    }
    // SIGKILL cannot be caught: what it leaves carries the dead process's tag, and the next
    // report removes it (a live report's folder stays).
    let live = held_report(&db, &out_dir.join("other.html"), &build, &tmp, "data");
    for point in ["data", "write"] {
        let mut child = held_report(&db, &out, &build, &tmp, point);
        signal(&child, "KILL");
        child.wait().expect("wait");
    }
    // Each report removes dead reports' folders as it starts: the second killed one removed the
    // first's, so what stays is its own and the live one's.
    let left = entries(&tmp);
    assert_eq!(
        left.len(),
        2,
        "the last killed report's folder and the live one's: {left:?}"
    );
    assert_eq!(
        entries(&out_dir).len(),
        1,
        "the half-written temporary file"
    );
    assert!(!out.exists(), "never a partial report under the name");
    // The next report, with the same temp dir as the killed ones.
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_graph-ascend"))
        .args(["report", db.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .args(["--assets", build.to_str().unwrap()])
        .env("TMPDIR", &tmp)
        .output()
        .expect("run graph-ascend report");
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .contains("graph-ascend-report"));
    assert_eq!(
        entries(&out_dir),
        ["r.html"],
        "the killed one's temporary file is removed"
    );
    let kept = entries(&tmp);
    assert_eq!(
        kept.len(),
        1,
        "only the live report's folder stays: {kept:?}"
    );
    assert!(
        kept[0].starts_with("graph-ascend-report-")
            && kept[0].contains(&format!(".{}.", live.id())),
        "{kept:?}"
    );
    // The live one held in the test hook is ended without a handler (SIGTERM at both points is
    // checked above); the next report removes its folder, as any dead one's.
    let mut live = live;
    signal(&live, "KILL");
    live.wait().expect("wait");
}

/// The report, written through a temporary file, gets the mode of any new file (0666 less the
/// umask), not a temporary file's private 0600.
#[test]
fn the_report_follows_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_stats", dir.path());
    let build = page_build(dir.path());
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "x").unwrap();
    let out = dir.path().join("r.html");
    let run = report(&db, &out, &build, &[]);
    assert!(run.status.success(), "{}", stderr(&run));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&out), mode(&plain));
}

#[test]
fn says_where_the_page_comes_from_when_it_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_stats", dir.path());
    let empty = dir.path().join("no-build");
    std::fs::create_dir(&empty).unwrap();
    let out = dir.path().join("r.html");
    let run = report(&db, &out, &empty, &[]);
    assert_eq!(run.status.code(), Some(2));
    let err = stderr(&run);
    assert!(err.contains("page's built assets"), "{err}");
    assert!(
        err.contains("wheel") && err.contains("make frontend") && err.contains("--assets"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn leaves_out_stacks_and_paths_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_stats", dir.path());
    let build = page_build(dir.path());
    let stacks = |data: &Value| -> usize {
        ["NPU", "Bench"]
            .iter()
            .flat_map(|side| {
                data["points"][0]["panes"][side]["details"]
                    .as_object()
                    .unwrap()
                    .values()
            })
            .map(|d| d["stack_info"].as_array().map_or(0, Vec::len))
            .sum()
    };
    let with = dir.path().join("with.html");
    let run = report(&db, &with, &build, &[]);
    assert!(run.status.success(), "{}", stderr(&run));
    let (_, data) = embedded(&std::fs::read_to_string(&with).unwrap());
    assert!(stacks(&data) > 0, "the fixture has stacks");
    let folder = dir.path().to_str().unwrap();
    assert!(data["provenance"]["file"]
        .as_str()
        .unwrap()
        .contains(folder));

    let without = dir.path().join("without.html");
    let run = report(&db, &without, &build, &["--no-paths"]);
    assert!(run.status.success(), "{}", stderr(&run));
    let html = std::fs::read_to_string(&without).unwrap();
    let (_, data) = embedded(&html);
    assert_eq!(stacks(&data), 0);
    let mut all = Vec::new();
    strings(&data, &mut all);
    assert!(
        all.iter()
            .all(|s| !s.contains(folder) && !s.contains("File \"")),
        "no path, no stack frame"
    );
    assert_eq!(data["provenance"]["file"], "compare_tf_stats.vis.db");
    assert!(data["leftOut"].to_string().contains("stacks and paths"));
}

#[test]
fn stays_within_its_size_bound_and_says_what_is_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_stats", dir.path());
    let build = page_build(dir.path());
    let whole = dir.path().join("whole.html");
    let run = report(&db, &whole, &build, &[]);
    assert!(run.status.success(), "{}", stderr(&run));
    let whole_len = std::fs::metadata(&whole).unwrap().len();
    assert!(whole_len > 500_000, "{whole_len}");
    // With no room for views or details: the configuration and the diagnosis only, and it says so.
    let out = dir.path().join("none.html");
    let run = report(&db, &out, &build, &["--max-mb", "0"]);
    assert!(run.status.success(), "{}", stderr(&run));
    let html = std::fs::read_to_string(&out).unwrap();
    // The data: the configuration and the diagnosis (about 20 kB here), no view, no details.
    assert!(html.len() < 60_000, "{}", html.len());
    let (_, data) = embedded(&html);
    let left = data["leftOut"].to_string();
    assert!(left.contains("size bound"), "{left}");
    assert_eq!(
        data["points"][0]["panes"]["NPU"]["details"]
            .as_object()
            .map_or(0, |d| d.len()),
        0
    );
}

/// A compare of 3 steps × 2 ranks whose only differences are at step 2, rank 1: generated dumps
/// (the test-support crate's), the target the golden run but for that rank folder, taken from a
/// perturbed run; converted by `graph-ascend convert`.
fn late_fault(dir: &Path) -> PathBuf {
    use graph_ascend_testkit::synthetic_dump::{self, DumpShape};
    let shape = |perturb| DumpShape {
        entries: 90,
        perturb,
        ranks: 2,
        steps: 3,
    };
    let (golden, perturbed, target) = (
        dir.join("golden"),
        dir.join("perturbed"),
        dir.join("target"),
    );
    synthetic_dump::write(&golden, shape(false)).unwrap();
    synthetic_dump::write(&perturbed, shape(true)).unwrap();
    synthetic_dump::write(&target, shape(false)).unwrap();
    let late = target.join("step2/rank1");
    std::fs::remove_dir_all(&late).unwrap();
    std::fs::create_dir_all(&late).unwrap();
    for f in std::fs::read_dir(perturbed.join("step2/rank1")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, late.join(f.file_name().unwrap())).unwrap();
    }
    let out = dir.join("out");
    let run = ga(&[
        "convert",
        "-tp",
        target.to_str().unwrap(),
        "-gp",
        golden.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    std::fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".vis.db"))
        .expect("a .vis.db")
}

fn points(data: &Value) -> Vec<(i64, i64)> {
    data["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["step"].as_i64().unwrap(), p["rank"].as_i64().unwrap()))
        .collect()
}

#[test]
fn opens_on_a_fault_at_a_later_step_on_another_rank() {
    let dir = tempfile::tempdir().unwrap();
    let db = late_fault(dir.path());
    let build = page_build(dir.path());
    let out = dir.path().join("late.html");
    let run = report(&db, &out, &build, &[]);
    assert!(run.status.success(), "{}", stderr(&run));
    let (_, data) = embedded(&std::fs::read_to_string(&out).unwrap());
    let first = &data["diagnosis"]["data"]["sources"][0];
    assert_eq!(
        (first["step"].as_i64(), first["rank"].as_i64()),
        (Some(2), Some(1))
    );
    // Opens on the first source; holds its step and rank, then the steps and ranks that follow it
    // (its step's other rank); the earlier steps are named, not held.
    assert_eq!(data["start"]["step"], 2);
    assert_eq!(data["start"]["rank"], 1);
    assert_eq!(data["start"]["node"], first["node"]);
    assert_eq!(points(&data), vec![(2, 1), (2, 0)]);
    assert_eq!(data["config"]["data"]["steps"], serde_json::json!([2]));
    assert_eq!(data["config"]["data"]["ranks"], serde_json::json!([0, 1]));
    assert_eq!(
        data["provenance"]["notHeld"],
        "step 0: ranks 0–1; step 1: ranks 0–1"
    );
    // Each point its own views and verdicts: the source's rank names it a source, the other not.
    let node = first["node"].as_str().unwrap();
    let held = &data["points"][0];
    assert!(held["panes"]["NPU"]["keys"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k == node));
    assert!(held["states"]["source"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k == node));
    assert!(!data["points"][1]["states"]["source"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k == node));

    // `--step/--rank` choose the point it opens on; the source's comes next.
    let chosen = dir.path().join("chosen.html");
    let run = report(&db, &chosen, &build, &["--step", "0", "--rank", "0"]);
    assert!(run.status.success(), "{}", stderr(&run));
    let (_, data) = embedded(&std::fs::read_to_string(&chosen).unwrap());
    assert_eq!(&points(&data)[..2], &[(0, 0), (2, 1)]);
    assert_eq!(data["start"]["node"], "");

    // A tight bound: the first point held, the others named as left out.
    let tight = dir.path().join("tight.html");
    let whole = std::fs::metadata(&out).unwrap().len() as f64 / 1e6;
    assert!(whole < 1.0, "{whole}");
    let run = report(&db, &tight, &build, &["--max-mb", "0"]);
    assert!(run.status.success(), "{}", stderr(&run));
    let (_, data) = embedded(&std::fs::read_to_string(&tight).unwrap());
    assert_eq!(points(&data), vec![(2, 1)]);
    let left = data["leftOut"].to_string();
    assert!(
        left.contains("did not fit the report's size bound: step 2: rank 0"),
        "{left}"
    );
}
