//! The open files of a conversion stay bounded whatever the number of graphs: a compare of many
//! ranks and steps converts under a limit of open files far below its number of graphs (each
//! graph's `dump.json` is read again through a bounded pool, not held open), and gives the same
//! file as without the limit.

use std::path::Path;
use std::process::{Command, Output};

use graph_ascend_testkit::synthetic_dump::{self, DumpShape};

/// The limit of open files the conversions run under: far below the 256 graphs of the dumps
/// (64 ranks × 2 steps a side), which an open `dump.json` each passed.
const LIMIT: u32 = 64;

/// `graph-ascend ARGS`, run by `sh` after `ulimit -n LIMIT` when `limit`.
fn ga(args: &[&str], limit: bool) -> Output {
    let bin = env!("CARGO_BIN_EXE_graph-ascend");
    let mut c = if limit {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!("ulimit -n {LIMIT} && exec \"$0\" \"$@\""))
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

#[test]
fn a_compare_of_more_graphs_than_the_limit_of_open_files_converts_the_same() {
    let tmp = tempfile::tempdir().expect("temporary folder");
    let shape = |perturb| DumpShape {
        entries: 5,
        perturb,
        ranks: 64,
        steps: 2,
    };
    let (golden, target) = (tmp.path().join("a"), tmp.path().join("b"));
    synthetic_dump::write(&golden, shape(false)).expect("golden dump");
    synthetic_dump::write(&target, shape(true)).expect("target dump");
    let (golden, target) = (golden.display().to_string(), target.display().to_string());
    let convert = |out: &Path, limit: bool, shard: Option<&str>| {
        let out = out.display().to_string();
        let mut args = vec!["convert", "-tp", &target, "-gp", &golden, "-o", &out];
        if let Some(shard) = shard {
            args.extend(["--shard", shard]);
        }
        ok(&ga(&args, limit));
    };

    let free = tmp.path().join("free");
    convert(&free, false, None);
    let free = only_file(&free, ".vis.db");
    let limited = tmp.path().join("limited");
    convert(&limited, true, None);
    same_file(&only_file(&limited, ".vis.db"), &free);

    // A shard reads its graphs the same way; the gather holds one part open at a time but
    // each part's index while it merges them (a few parts here).
    let parts = tmp.path().join("parts");
    convert(&parts, true, Some("0/2"));
    convert(&parts, true, Some("1/2"));
    let gathered = tmp.path().join("gathered.vis.db");
    let (parts, out) = (parts.display().to_string(), gathered.display().to_string());
    ok(&ga(&["gather", "-o", &out, &parts], true));
    same_file(&out, &free);
}
