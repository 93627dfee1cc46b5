//! The library reports progress through its callback: counts only grow, end at the total, and
//! the last report is `Done` naming the written file.

use std::path::Path;
use std::sync::Mutex;

use graph_ascend_convert::{convert, ConvertOptions, Progress, Stage};

#[test]
fn progress_reaches_done() {
    let dumps = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/dumps");
    let tmp = tempfile::tempdir().unwrap();
    let opts = ConvertOptions {
        target: dumps.join("tf_stats_b"),
        golden: Some(dumps.join("tf_stats_a")),
        output: tmp.path().to_path_buf(),
        ..Default::default()
    };
    let seen: Mutex<Vec<Progress>> = Mutex::new(Vec::new());
    let path = convert(&opts, &|p| seen.lock().unwrap().push(p.clone())).unwrap();
    let seen = seen.into_inner().unwrap();
    assert!(seen.len() >= 3, "{seen:?}");
    let mut dones: Vec<u64> = seen.iter().map(|p| p.done).collect();
    dones.sort();
    assert_eq!(dones.last(), Some(&seen[0].total));
    let last = seen.iter().max_by_key(|p| p.done).unwrap();
    assert_eq!(last.stage, Stage::Done);
    assert!(last.message.contains(&path.display().to_string()));
    assert!(path
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("compare_"));
}

#[test]
fn cancelled_conversion_leaves_nothing() {
    use std::sync::atomic::AtomicBool;
    let dumps = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/dumps");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let opts = ConvertOptions {
        target: dumps.join("tf_stats_b"),
        golden: Some(dumps.join("tf_stats_a")),
        output: out.clone(),
        ..Default::default()
    };
    let cancel = AtomicBool::new(true);
    let err = graph_ascend_convert::convert_cancellable(&opts, &|_| {}, &cancel).unwrap_err();
    assert!(
        matches!(err, graph_ascend_convert::ConvertError::Cancelled),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&out).map(|d| d.count()).unwrap_or(0), 0);
}
