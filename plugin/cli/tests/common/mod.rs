//! Helpers shared by the CLI's tests: the repository's fixtures, an upstream case's `.vis.db`
//! unpacked, the `graph-ascend` binary run as the user runs it, and the generated sets' runs,
//! dumps and diagnoses read back.
// Each test binary compiles this module; not all of them use every helper.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `tests/fixtures` of the repository.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// Decompresses an upstream case's `.vis.db` into `dir`.
pub fn unpack(case: &str, dir: &Path) -> PathBuf {
    let case_dir = fixtures().join("upstream_vis").join(case);
    let xz = std::fs::read_dir(&case_dir)
        .expect("case dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".vis.db.xz"))
        .expect("a .vis.db.xz");
    let out_path = dir.join(format!("{case}.vis.db"));
    let mut input = std::io::BufReader::new(std::fs::File::open(&xz).expect("open"));
    let mut out = std::fs::File::create(&out_path).expect("create");
    lzma_rs::xz_decompress(&mut input, &mut out).expect("decompress");
    out_path
}

/// The `graph-ascend` binary under test: this build's, or `GRAPH_ASCEND_BINARY` (another build,
/// for a before/after of the sweeps' curves).
pub fn binary() -> PathBuf {
    std::env::var_os("GRAPH_ASCEND_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_graph-ascend")))
}

/// Runs `graph-ascend ARGS`.
pub fn ga(args: &[&str]) -> Output {
    Command::new(binary())
        .args(args)
        .output()
        .expect("run graph-ascend")
}

/// The real 48-layer pair (`tests/fixtures/big`: 8 micro-batches, an `eps` argument and a weight
/// changed) unpacked into `dir` and converted as a user would (`convert -tp b -gp a`): the
/// compare's `.vis.db`.
pub fn convert_48_layer_pair(dir: &Path) -> PathBuf {
    for side in ["a", "b"] {
        let archive = fixtures().join(format!("big/big_stats_{side}.tar.xz"));
        let untar = Command::new("tar")
            .arg("xJf")
            .arg(&archive)
            .arg("-C")
            .arg(dir)
            .output()
            .expect("run tar");
        assert!(
            untar.status.success(),
            "{}",
            String::from_utf8_lossy(&untar.stderr)
        );
    }
    let rank_dir = |side: &str| {
        std::fs::read_dir(dir.join(format!("big_stats_{side}/step0")))
            .expect("step0")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.is_dir())
            .expect("a rank folder")
    };
    let out = dir.join("out");
    let convert = ga(&[
        "convert",
        "-tp",
        rank_dir("b").to_str().expect("UTF-8 path"),
        "-gp",
        rank_dir("a").to_str().expect("UTF-8 path"),
        "-o",
        out.to_str().expect("UTF-8 path"),
    ]);
    assert!(
        convert.status.success(),
        "{}",
        String::from_utf8_lossy(&convert.stderr)
    );
    std::fs::read_dir(&out)
        .expect("the output folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".vis.db"))
        .expect("a .vis.db")
}

/// `graph-ascend diagnose DB --format json` of a file we converted, read from our own diagnosis
/// table (which `convert` writes; checked to be there), then again with the table dropped, as
/// msprobe's files are read: the two answers must be the same byte for byte. Returns the first run.
pub fn diagnose_json_both_ways(db: &Path) -> Output {
    let path = db.to_str().expect("utf-8");
    let from_table = ga(&["diagnose", path, "--format", "json"]);
    let conn = rusqlite::Connection::open(db).expect("sqlite");
    let graphs: i64 = conn
        .query_row(
            "SELECT count(*) FROM ga_diagnosis WHERE part = 0",
            [],
            |r| r.get(0),
        )
        .expect("convert writes our diagnosis table");
    assert!(graphs >= 2, "{} table headers in {path}", graphs);
    conn.execute_batch("DROP TABLE ga_diagnosis")
        .expect("drop the table");
    drop(conn);
    let from_rows = ga(&["diagnose", path, "--format", "json"]);
    assert_eq!(from_table.status.code(), from_rows.status.code(), "{path}");
    assert!(
        from_table.stdout == from_rows.stdout,
        "{path}: from the table\n{}\nfrom the rows\n{}",
        String::from_utf8_lossy(&from_table.stdout),
        String::from_utf8_lossy(&from_rows.stdout)
    );
    from_table
}

/// Writes one stored run of a generated set (`step<S>/<rank>/{construct,dump}.json` → text) under
/// `dir/<run>`, with the empty `stack.json` the converter wants (the rules never read stacks).
pub fn write_run(
    dir: &Path,
    run: &str,
    files: &serde_json::Map<String, serde_json::Value>,
) -> PathBuf {
    let root = dir.join(run);
    for (rel, text) in files {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&path, text.as_str().expect("file text")).expect("write");
        std::fs::write(path.with_file_name("stack.json"), "{}").expect("write stack");
    }
    root
}

/// Converts the pair `target` against `golden` into `out` as a user would: the compare's
/// `.vis.db`.
pub fn convert_pair(target: &Path, golden: &Path, out: &Path) -> PathBuf {
    let convert = ga(&[
        "convert",
        "--target_path",
        target.to_str().expect("UTF-8 path"),
        "--golden_path",
        golden.to_str().expect("UTF-8 path"),
        "-o",
        out.to_str().expect("UTF-8 path"),
    ]);
    assert!(
        convert.status.success(),
        "{}: convert failed: {}",
        target.display(),
        String::from_utf8_lossy(&convert.stderr)
    );
    std::fs::read_dir(out)
        .expect("output dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".vis.db"))
        .expect("a .vis.db")
}

/// A generated set of `tests/diagnosis/` (`name`: `sweep.json.xz`, …), decompressed and parsed.
pub fn generated_set(name: &str) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/diagnosis")
        .join(name);
    let mut xz = std::io::BufReader::new(std::fs::File::open(&path).expect("a generated set"));
    let mut json = Vec::new();
    lzma_rs::xz_decompress(&mut xz, &mut json).expect("decompress");
    serde_json::from_slice(&json).expect("the set's JSON")
}

/// `graph-ascend diagnose DB --format json --top 1000 EXTRA…`, parsed (exit status 0 or 1).
pub fn diagnose_json(db: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "diagnose",
        db.to_str().expect("UTF-8 path"),
        "--format",
        "json",
        "--top",
        "1000",
    ];
    args.extend_from_slice(extra);
    let run = ga(&args);
    assert!(
        matches!(run.status.code(), Some(0 | 1)),
        "{}: diagnose failed: {}",
        db.display(),
        String::from_utf8_lossy(&run.stderr)
    );
    serde_json::from_slice(&run.stdout).expect("diagnosis JSON")
}

/// The dump of a stored run (`step<S>/<rank folder>/dump.json` → text) at `step`, in its
/// `rank`-th rank folder by name (`name` → node).
pub fn stored_dump(
    run: &serde_json::Value,
    step: u64,
    rank: usize,
) -> serde_json::Map<String, serde_json::Value> {
    let files = run.as_object().expect("files of a run");
    let prefix = format!("step{step}/");
    let mut dumps: Vec<(&String, &serde_json::Value)> = files
        .iter()
        .filter(|(rel, _)| rel.starts_with(&prefix) && rel.ends_with("/dump.json"))
        .collect();
    dumps.sort_by(|a, b| a.0.cmp(b.0));
    let (_, text) = dumps.get(rank).expect("a dump of the step and rank");
    // Python's JSON writes a non-finite statistic as a bare NaN or Infinity: read as strings.
    let text = text
        .as_str()
        .expect("text")
        .replace("-Infinity", "\"-inf\"")
        .replace("Infinity", "\"inf\"")
        .replace("NaN", "\"nan\"");
    let dump: serde_json::Value = serde_json::from_str(&text).expect("dump JSON");
    dump["data"].as_object().expect("dump data").clone()
}

/// The relative error of one tensor's statistics (docs/diagnosis.md §1): `|ΔNorm| / |Norm|` and
/// `|ΔMax|`, `|ΔMin|`, `|ΔMean|` over the scale `max(|Max|, |Min|)` of both sides; `None`
/// unless all four are numbers on both sides.
pub fn entry_err(t: &serde_json::Value, g: &serde_json::Value) -> Option<f64> {
    let read = |e: &serde_json::Value| -> Option<Vec<f64>> {
        ["Max", "Min", "Mean", "Norm"]
            .iter()
            .map(|k| e.get(*k)?.as_f64())
            .collect()
    };
    let (t, g) = (read(t)?, read(g)?);
    let scale = [t[0], t[1], g[0], g[1]]
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let mut err = if g[3] != 0.0 {
        (t[3] - g[3]).abs() / g[3].abs()
    } else {
        0.0
    };
    if scale > 0.0 {
        for k in 0..3 {
            err = err.max((t[k] - g[k]).abs() / scale);
        }
    }
    Some(err)
}

/// The worst output error of node `name` between two dumps.
pub fn output_err(
    target: &serde_json::Map<String, serde_json::Value>,
    golden: &serde_json::Map<String, serde_json::Value>,
    name: &str,
) -> f64 {
    let outs =
        |d: &serde_json::Map<String, serde_json::Value>| d[name]["output"].as_array().cloned();
    let (t, g) = (
        outs(target).expect("outputs"),
        outs(golden).expect("outputs"),
    );
    t.iter()
        .zip(&g)
        .filter_map(|(a, b)| entry_err(a, b))
        .fold(0.0, f64::max)
}

/// The nodes of a diagnosis's sources, in its order.
pub fn sources(found: &serde_json::Value) -> Vec<&str> {
    found["sources"]
        .as_array()
        .map(|s| s.iter().filter_map(|s| s["node"].as_str()).collect())
        .unwrap_or_default()
}
