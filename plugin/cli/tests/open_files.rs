//! The open files of a conversion stay bounded whatever the number of graphs: a compare of many
//! ranks and steps converts under a limit of open files far below its number of graphs (each
//! graph's `dump.json` is read again through a bounded pool, not held open), and gives the same
//! file as without the limit. The gather of a sharded conversion reads a bounded number of parts
//! at once whatever the number of shards, and gives the same file.

use std::path::Path;
use std::process::{Command, Output};

use graph_ascend_testkit::synthetic_dump::{self, DumpShape};

/// The limit of open files the conversions run under: far below the 256 graphs of the dumps
/// (64 ranks × 2 steps a side), which an open `dump.json` each passed.
const LIMIT: u32 = 64;

/// `graph-ascend ARGS`, run by `sh` after `ulimit -n LIMIT` when `limit`.
fn ga(args: &[&str], limit: bool) -> Output {
    ga_under(args, limit.then_some(LIMIT))
}

/// `graph-ascend ARGS`, run by `sh` after `ulimit -n LIMIT` when a limit is given.
fn ga_under(args: &[&str], limit: Option<u32>) -> Output {
    let bin = env!("CARGO_BIN_EXE_graph-ascend");
    let mut c = if let Some(limit) = limit {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
            .arg(bin);
        c
    } else {
        Command::new(bin)
    };
    // A few reading threads whatever the machine: a file the pool closes while a thread reads
    // it stays open until the read ends (one more a thread).
    c.args(args).env("RAYON_NUM_THREADS", "4");
    c.output().expect("run graph-ascend")
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn only_file(dir: &Path, ext: &str) -> String {
    let files: Vec<_> = std::fs::read_dir(dir)
        .expect("output folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(ext))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].display().to_string()
}

fn same_file(a: &str, b: &str) {
    let o = ga(&["diff-visdb", a, b], false);
    ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with("equal"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// A golden and a target dump of 64 ranks × 2 steps a side (256 graphs) under `dir`.
fn dumps(dir: &Path) -> (String, String) {
    let shape = |perturb| DumpShape {
        entries: 5,
        perturb,
        ranks: 64,
        steps: 2,
    };
    let (golden, target) = (dir.join("a"), dir.join("b"));
    synthetic_dump::write(&golden, shape(false)).expect("golden dump");
    synthetic_dump::write(&target, shape(true)).expect("target dump");
    (golden.display().to_string(), target.display().to_string())
}

/// Converts the compare of `golden` and `target` into `out` (under [`LIMIT`] when `limit`),
/// as shard `shard` ("I/N") when given.
fn convert(golden: &str, target: &str, out: &Path, limit: bool, shard: Option<&str>) {
    let out = out.display().to_string();
    let mut args = vec!["convert", "-tp", target, "-gp", golden, "-o", &out];
    if let Some(shard) = shard {
        args.extend(["--shard", shard]);
    }
    ok(&ga(&args, limit));
}

#[test]
fn a_compare_of_more_graphs_than_the_limit_of_open_files_converts_the_same() {
    let tmp = tempfile::tempdir().expect("temporary folder");
    let (golden, target) = dumps(tmp.path());
    let convert = |out: &Path, limit, shard| convert(&golden, &target, out, limit, shard);

    let free = tmp.path().join("free");
    convert(&free, false, None);
    let free = only_file(&free, ".vis.db");
    let limited = tmp.path().join("limited");
    convert(&limited, true, None);
    same_file(&only_file(&limited, ".vis.db"), &free);

    // A shard reads its graphs the same way.
    let parts = tmp.path().join("parts");
    convert(&parts, true, Some("0/2"));
    convert(&parts, true, Some("1/2"));
    let gathered = tmp.path().join("gathered.vis.db");
    let (parts, out) = (parts.display().to_string(), gathered.display().to_string());
    ok(&ga(&["gather", "-o", &out, &parts], true));
    same_file(&out, &free);
}

/// The limit of open files the gather of [`SHARDS`] parts runs under: below the parts, which
/// an open connection each passed while their indexes were merged.
const GATHER_LIMIT: u32 = 24;
/// Parts of the sharded conversion gathered under [`GATHER_LIMIT`].
const SHARDS: u32 = 40;

#[test]
fn a_gather_of_more_parts_than_the_limit_of_open_files_gives_the_same_file() {
    let tmp = tempfile::tempdir().expect("temporary folder");
    let (golden, target) = dumps(tmp.path());
    let free = tmp.path().join("free");
    convert(&golden, &target, &free, false, None);
    let free = only_file(&free, ".vis.db");

    let parts = tmp.path().join("parts");
    for i in 0..SHARDS {
        convert(
            &golden,
            &target,
            &parts,
            false,
            Some(&format!("{i}/{SHARDS}")),
        );
    }
    let parts = parts.display().to_string();
    // Without a limit the parts are merged at once; under it, in groups of a few, through
    // sorted runs: the same file either way.
    let at_once = tmp.path().join("at_once.vis.db").display().to_string();
    ok(&ga_under(&["gather", "-o", &at_once, &parts], None));
    same_file(&at_once, &free);
    let limited = tmp.path().join("limited.vis.db").display().to_string();
    ok(&ga_under(
        &["gather", "-o", &limited, &parts],
        Some(GATHER_LIMIT),
    ));
    same_file(&limited, &free);
}
