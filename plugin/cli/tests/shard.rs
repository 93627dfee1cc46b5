//! `graph-ascend convert --shard` and `graph-ascend gather` as a job array runs them: the
//! shard taken from Slurm's and Kubernetes' variables, a shard process killed mid-way, the
//! errors and exit codes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

fn dumps() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/dumps")
}

fn ga() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_graph-ascend"));
    for var in [
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_STEP",
        "SLURM_ARRAY_TASK_COUNT",
        "JOB_COMPLETION_INDEX",
    ] {
        c.env_remove(var);
    }
    c
}

fn run(c: &mut Command) -> Output {
    c.output().expect("run graph-ascend")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn convert_args(target: &Path, out: &Path) -> Vec<String> {
    vec![
        "convert".into(),
        "-tp".into(),
        target.display().to_string(),
        "-o".into(),
        out.display().to_string(),
    ]
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn bare_shard_reads_the_job_array_variables() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("parts");
    let target = dumps().join("dist_stats_a");
    // Slurm: --array=1-2 → task ids 1 and 2 are shards 0 and 1.
    for id in ["1", "2"] {
        let o = run(ga()
            .args(convert_args(&target, &out))
            .arg("--shard")
            .env("SLURM_ARRAY_TASK_ID", id)
            .env("SLURM_ARRAY_TASK_MIN", "1")
            .env("SLURM_ARRAY_TASK_COUNT", "2"));
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert_eq!(
        names(&out),
        [
            "shard-00000-of-00002.vis.part",
            "shard-00001-of-00002.vis.part"
        ]
    );
    // Kubernetes: JOB_COMPLETION_INDEX with the count given.
    let k8s = tmp.path().join("k8s");
    let o = run(ga()
        .args(convert_args(&target, &k8s))
        .args(["--shard", "--shard-count", "3"])
        .env("JOB_COMPLETION_INDEX", "2"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(names(&k8s), ["shard-00002-of-00003.vis.part"]);
    let o = run(ga()
        .args(convert_args(&target, &k8s))
        .arg("--shard")
        .env("JOB_COMPLETION_INDEX", "2"));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--shard-count"), "{}", stderr(&o));
    // Outside a job array a bare --shard says where it looked.
    let o = run(ga().args(convert_args(&target, &k8s)).arg("--shard"));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("SLURM_ARRAY_TASK_ID"), "{}", stderr(&o));
    // And the gather of the Slurm parts answers with the file it wrote.
    let o = run(ga()
        .arg("gather")
        .arg(&out)
        .arg("-o")
        .arg(tmp.path().join("g")));
    assert!(o.status.success(), "{}", stderr(&o));
    let written = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(written.ends_with(".vis.db") && Path::new(&written).is_file());
}

#[test]
fn bad_shards_and_missing_parts_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("parts");
    let target = dumps().join("dist_stats_a");
    let o = run(ga()
        .args(convert_args(&target, &out))
        .args(["--shard", "2/2"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("I must be below N"), "{}", stderr(&o));
    assert!(!out.exists(), "nothing written for a bad shard");
    let o = run(ga()
        .args(convert_args(&target, &out))
        .args(["--shard", "0/2"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(ga()
        .arg("gather")
        .arg(&out)
        .arg("-o")
        .arg(tmp.path().join("g")));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("missing parts: shard(s) 1 of 2"),
        "{}",
        stderr(&o)
    );
    assert!(!tmp.path().join("g").exists());
}

/// A shard process killed at any point never leaves a part that the gather takes for whole:
/// the shard's old part stays as it was, or the new one is complete. Killed at several
/// moments (whatever the machine's speed, some fall mid-conversion); then re-run, it replaces
/// only its own part and the gather equals the unsharded conversion.
#[test]
fn a_killed_shard_process_never_leaves_a_half_part() {
    let tmp = tempfile::tempdir().unwrap();
    // 96 rank folders (copies of the real two ranks): enough work to be killed mid-way.
    let target = tmp.path().join("dump");
    for r in 0..96 {
        let from = dumps().join(format!("dist_stats_a/step0/rank{}", r % 2));
        let to = target.join(format!("rank{r}"));
        std::fs::create_dir_all(&to).unwrap();
        for f in ["dump.json", "construct.json", "stack.json"] {
            std::fs::copy(from.join(f), to.join(f)).unwrap();
        }
    }
    let parts = tmp.path().join("parts");
    let shard = |i: &str| {
        let mut c = ga();
        c.args(convert_args(&target, &parts)).args(["--shard", i]);
        c
    };
    for i in ["0/2", "1/2"] {
        let o = run(&mut shard(i));
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let part1 = parts.join("shard-00001-of-00002.vis.part");
    let part1_bytes = std::fs::read(&part1).unwrap();
    let gather = |n: usize| {
        run(ga()
            .arg("gather")
            .arg(&parts)
            .arg("-o")
            .arg(tmp.path().join(format!("g{n}"))))
    };
    for (n, ms) in [5u64, 40, 120, 250, 500].into_iter().enumerate() {
        let mut child = shard("0/2")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(ms));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(std::fs::read(&part1).unwrap(), part1_bytes);
        let o = gather(n);
        assert!(
            o.status.success(),
            "after a kill at {ms} ms: {}",
            stderr(&o)
        );
    }
    let o = run(&mut shard("0/2"));
    assert!(o.status.success(), "{}", stderr(&o));
    // Only the two parts are left: the killed runs' temporaries were cleaned by the re-run.
    assert_eq!(
        names(&parts),
        [
            "shard-00000-of-00002.vis.part",
            "shard-00001-of-00002.vis.part"
        ]
    );
    let o = gather(99);
    assert!(o.status.success(), "{}", stderr(&o));
    let gathered = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let o = run(ga().args(convert_args(&target, &tmp.path().join("whole"))));
    assert!(o.status.success(), "{}", stderr(&o));
    let whole = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let o = run(ga().args(["diff-visdb", &whole, &gathered]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
}
