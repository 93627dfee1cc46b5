//! The first divergence over real msprobe 26.2 monitor output (tests/fixtures/monitor, made by
//! tests/monitor/make_monitor_fixtures.py): noise-only pairs name none; each faulty run names
//! the step, band and module its fault was injected at (from the fixtures' `faults.json`), in
//! v1 CSVs (two ranks), v2 CSVs and trend.db.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use graph_ascend_monitor::{analyze, Format, Rule, Run, Trend};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/monitor")
}

/// The three archives unpacked once into a temporary folder kept for the test binary's life.
fn unpacked() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        for archive in [
            "monitor_v1.tar.xz",
            "monitor_v2.tar.xz",
            "monitor_trend.tar.xz",
        ] {
            let out = Command::new("tar")
                .arg("-xJf")
                .arg(fixtures().join(archive))
                .arg("-C")
                .arg(dir.path())
                .output()
                .expect("run tar");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        dir
    })
    .path()
}

/// The fault injected into `run`, from faults.json: (step, band, module).
fn fault(run: &str) -> Option<(i64, String, String)> {
    let text = std::fs::read_to_string(fixtures().join("faults.json")).unwrap();
    let faults: serde_json::Value = serde_json::from_str(&text).unwrap();
    let f = &faults["runs"][run]["fault"];
    if f.is_null() {
        return None;
    }
    Some((
        f["step"].as_i64().unwrap(),
        f["band"].as_str().unwrap().to_string(),
        f["module"].as_str().unwrap().to_string(),
    ))
}

fn run_path(layout: &str, run: &str) -> PathBuf {
    let p = unpacked().join(layout).join(run);
    if layout == "trend" {
        p.join("monitor_data.trend.db")
    } else {
        p
    }
}

fn trend(layout: &str, target: &str, golden: &str, reference: Option<(&str, &str)>) -> Trend {
    let t = Run::open(&run_path(layout, target)).unwrap();
    let g = Run::open(&run_path(layout, golden)).unwrap();
    let r = reference.map(|(a, b)| {
        (
            Run::open(&run_path(layout, a)).unwrap(),
            Run::open(&run_path(layout, b)).unwrap(),
        )
    });
    analyze(
        &t,
        &g,
        r.as_ref().map(|(a, b)| (a, b)),
        "norm",
        &Rule::default(),
        |_| {},
    )
    .unwrap()
}

fn assert_names_its_fault(layout: &str, run: &str, t: &Trend) {
    let (step, band, module) = fault(run).unwrap();
    let d = t
        .first_divergence
        .as_ref()
        .unwrap_or_else(|| panic!("{layout} {run}: no divergence named"));
    assert_eq!(
        (d.at.step, d.band.name(), d.module.as_str()),
        (step, band.as_str(), module.as_str()),
        "{layout} {run}: {d:?}"
    );
}

fn assert_names_none(layout: &str, run: &str, t: &Trend) {
    assert!(fault(run).is_none());
    assert!(
        t.first_divergence.is_none(),
        "{layout} {run}: {:?}",
        t.first_divergence
    );
}

#[test]
fn v1_two_ranks_noise_only_pairs_name_none() {
    for run in ["noise_bf16", "noise_seed"] {
        let t = trend("v1", run, "golden", None);
        assert_eq!(t.ranks, [0, 1]);
        assert_eq!(t.steps, Some((0, 499)));
        assert_eq!(t.unpaired_count, 0, "{:?}", t.unpaired);
        // 10 modules forward and backward, 10 parameters' weight gradients and updates; but
        // `embed`'s backward: the gradient of its input (the data) is `nan` in both runs.
        assert_eq!(t.units.len(), 39);
        assert_names_none("v1", run, &t);
    }
}

#[test]
fn v1_two_ranks_faults_are_named_at_their_step_and_module() {
    for run in ["fault_weight", "fault_grad", "fault_optim"] {
        let t = trend("v1", run, "golden", None);
        assert_names_its_fault("v1", run, &t);
    }
    // The weight was corrupted on rank 1 only: the worst rank is 1.
    let t = trend("v1", "fault_weight", "golden", None);
    assert_eq!(t.first_divergence.unwrap().at.rank, 1);
}

#[test]
fn a_reference_pair_keeps_the_fault_and_the_silence() {
    let t = trend("v1", "fault_grad", "golden", Some(("noise_seed", "golden")));
    assert_names_its_fault("v1", "fault_grad", &t);
    let t = trend("v1", "noise_bf16", "golden", Some(("noise_seed", "golden")));
    assert_names_none("v1", "noise_bf16", &t);
}

#[test]
fn v2_csvs() {
    let t = trend("v2", "noise_bf16", "golden", None);
    assert_eq!(t.target.format, Format::V2);
    assert_eq!(t.ranks, [0]);
    assert_names_none("v2", "noise_bf16", &t);
    let t = trend("v2", "fault_weight", "golden", None);
    assert_names_its_fault("v2", "fault_weight", &t);
}

#[test]
fn trend_db() {
    let t = trend("trend", "noise_bf16", "golden", None);
    assert_eq!(t.target.format, Format::TrendDb);
    assert_eq!(t.ranks, [0, 1]);
    // Only activations went into the databases: forward and backward of 10 modules (but
    // `embed`'s backward, see above).
    assert_eq!(t.units.len(), 19);
    assert_names_none("trend", "noise_bf16", &t);
    let t = trend("trend", "fault_weight", "golden", None);
    assert_names_its_fault("trend", "fault_weight", &t);
}

#[test]
fn a_trend_db_pairs_with_its_csvs() {
    // The database holds the CSVs' numbers: the same first divergence across formats.
    let t = Run::open(&run_path("trend", "fault_weight")).unwrap();
    let g = Run::open(&run_path("v1", "golden")).unwrap();
    let found = analyze(&t, &g, None, "norm", &Rule::default(), |_| {}).unwrap();
    assert_names_its_fault("trend+v1", "fault_weight", &found);
}

/// Copies a v1 run, cutting the last line of one file in half (a run still being written).
fn copy_with_torn_line(src: &Path, dest: &Path) {
    for rank in std::fs::read_dir(src).unwrap() {
        let rank = rank.unwrap().path();
        let out = dest.join(rank.file_name().unwrap());
        std::fs::create_dir_all(&out).unwrap();
        for f in std::fs::read_dir(&rank).unwrap() {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_str().unwrap().to_string();
            let mut bytes = std::fs::read(&f).unwrap();
            if name == "actv_400-499.csv" {
                let keep = bytes.len() - 20;
                bytes.truncate(keep);
            }
            std::fs::write(out.join(name), bytes).unwrap();
        }
    }
}

#[test]
fn a_run_still_being_written_is_read_as_far_as_complete() {
    let dir = tempfile::tempdir().unwrap();
    copy_with_torn_line(&run_path("v1", "fault_weight"), dir.path());
    let t = Run::open(dir.path()).unwrap();
    let g = Run::open(&run_path("v1", "golden")).unwrap();
    let found = analyze(&t, &g, None, "norm", &Rule::default(), |_| {}).unwrap();
    assert_names_its_fault("torn", "fault_weight", &found);
    let full = trend("v1", "fault_weight", "golden", None);
    // One row fewer per rank (the torn one), nothing else lost.
    assert_eq!(found.rows.0 + 2, full.rows.0);
}

#[test]
fn bad_input_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let e = Run::open(dir.path()).unwrap_err().to_string();
    assert!(e.contains("no msprobe monitor output"), "{e}");
    let t = Run::open(&run_path("v1", "golden")).unwrap();
    let e = analyze(&t, &t, None, "mean", &Rule::default(), |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no statistic `mean`") && e.contains(".csv"),
        "{e}"
    );
    // Rank folders with no file yet: nothing to compare.
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(empty.join("Dec02_13-24-37-rank0-8fbdaf33")).unwrap();
    let e = analyze(
        &Run::open(&empty).unwrap(),
        &t,
        None,
        "norm",
        &Rule::default(),
        |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("nothing to compare"), "{e}");
    let db = dir.path().join("x.trend.db");
    std::fs::write(&db, b"not a database at all, just some bytes").unwrap();
    let e = Run::open(&db).unwrap_err().to_string();
    assert!(e.contains("x.trend.db"), "{e}");
}

/// Copies a v1 run with every `layers.` name written `model.layers.` (as a run without
/// msprobe's `squash_name` names them when the model nests its layers under `model`).
fn copy_unsquashed(src: &Path, dest: &Path) {
    for rank in std::fs::read_dir(src).unwrap() {
        let rank = rank.unwrap().path();
        let out = dest.join(rank.file_name().unwrap());
        std::fs::create_dir_all(&out).unwrap();
        for f in std::fs::read_dir(&rank).unwrap() {
            let f = f.unwrap().path();
            let text = std::fs::read_to_string(&f).unwrap();
            let text = text.replace(",layers.", ",model.layers.");
            std::fs::write(out.join(f.file_name().unwrap()), text).unwrap();
        }
    }
}

#[test]
fn squashed_names_pair_with_unsquashed_ones() {
    let dir = tempfile::tempdir().unwrap();
    copy_unsquashed(&run_path("v1", "golden"), dir.path());
    let t = Run::open(&run_path("v1", "fault_optim")).unwrap();
    let g = Run::open(dir.path()).unwrap();
    for (a, b) in [(&t, &g), (&g, &t)] {
        let found = analyze(a, b, None, "norm", &Rule::default(), |_| {}).unwrap();
        assert_eq!(found.unpaired_count, 0, "{:?}", found.unpaired);
        assert!(found.paired_by_squash > 0);
        assert_eq!(found.units.len(), 39);
    }
    let found = analyze(&t, &g, None, "norm", &Rule::default(), |_| {}).unwrap();
    assert_names_its_fault("squash", "fault_optim", &found);
}
