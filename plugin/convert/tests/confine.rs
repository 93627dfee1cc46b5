//! A confined conversion (what the sidecar starts) reads only files that resolve inside its
//! root when they are opened. The service checks the folders before a
//! conversion starts; these tests skip that check, as a link swapped in after it would, and
//! call the converter directly with a root and a link to outside.

use std::path::{Path, PathBuf};

use graph_ascend_convert::{convert, ConvertOptions, LayerMapping};
use graph_ascend_dump::Confine;

fn fixture_rank(dump: &str) -> PathBuf {
    let step = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/dumps")
        .join(dump)
        .join("step0");
    std::fs::read_dir(&step)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// Replaces `file` by a link to a copy of it outside `logdir`.
fn link_outside(file: &Path, outside: &Path) {
    std::fs::create_dir_all(outside).unwrap();
    let away = outside.join(file.file_name().unwrap());
    std::fs::rename(file, &away).unwrap();
    std::os::unix::fs::symlink(&away, file).unwrap();
}

fn options(target: PathBuf, out: PathBuf, confine: Confine) -> ConvertOptions {
    ConvertOptions {
        target,
        output: out,
        confine,
        ..Default::default()
    }
}

#[test]
fn each_rank_file_linked_outside_is_refused_when_confined() {
    for file in ["dump.json", "construct.json", "stack.json"] {
        let tmp = tempfile::tempdir().unwrap();
        let logdir = tmp.path().join("logdir");
        let rank = logdir.join("rank0");
        copy_dir(&fixture_rank("mlp_stats"), &rank);
        link_outside(&rank.join(file), &tmp.path().join("outside"));
        let confine = Confine::under(&logdir).unwrap();
        let err = convert(&options(rank.clone(), logdir.join("out"), confine), &|_| {})
            .expect_err("a file outside the logdir")
            .to_string();
        assert!(
            err.contains(file) && err.contains("outside"),
            "{file}: {err}"
        );
        assert_eq!(
            std::fs::read_dir(logdir.join("out")).map_or(0, |d| d.count()),
            0,
            "{file}: nothing written"
        );
        // Unconfined (the command line) the same folder converts: the refusal is the root's.
        convert(
            &options(rank, tmp.path().join("cli"), Confine::anywhere()),
            &|_| {},
        )
        .expect("the command line reads links anywhere");
    }
}

#[test]
fn links_that_stay_inside_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    let logdir = tmp.path().join("logdir");
    let rank = logdir.join("rank0");
    copy_dir(&fixture_rank("mlp_stats"), &rank);
    let kept = logdir.join("kept");
    link_outside(&rank.join("dump.json"), &kept);
    let confine = Confine::under(&logdir).unwrap();
    convert(&options(rank, logdir.join("out"), confine), &|_| {}).expect("inside the logdir");
}

#[test]
fn a_tensor_or_mapping_file_linked_outside_is_refused_when_confined() {
    let tmp = tempfile::tempdir().unwrap();
    let logdir = tmp.path().join("logdir");
    let (npu, bench) = (logdir.join("npu"), logdir.join("bench"));
    copy_dir(&fixture_rank("tf_small_tensor_a"), &npu);
    copy_dir(&fixture_rank("tf_small_tensor_b"), &bench);
    let tensor = std::fs::read_dir(npu.join("dump_tensor_data"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "pt"))
        .unwrap();
    let confine = Confine::under(&logdir).unwrap();
    let compare = |out: &str, confine: &Confine, lm: LayerMapping| ConvertOptions {
        golden: Some(bench.clone()),
        layer_mapping: lm,
        ..options(npu.clone(), logdir.join(out), confine.clone())
    };
    convert(&compare("before", &confine, LayerMapping::None), &|_| {})
        .expect("the copied pair converts");

    link_outside(&tensor, &tmp.path().join("outside"));
    let err = convert(&compare("out", &confine, LayerMapping::None), &|_| {})
        .expect_err("a tensor outside the logdir")
        .to_string();
    let name = tensor.file_name().unwrap().to_string_lossy().into_owned();
    assert!(err.contains(&name) && err.contains("outside"), "{err}");

    let yaml = logdir.join("mapping.yaml");
    std::fs::write(&yaml, "{}\n").unwrap();
    link_outside(&yaml, &tmp.path().join("outside"));
    let err = convert(
        &compare("lm", &Confine::anywhere(), LayerMapping::File(yaml.clone())),
        &|_| {},
    )
    .map(|_| ())
    .and_then(|()| {
        convert(
            &compare("lm2", &confine, LayerMapping::File(yaml.clone())),
            &|_| {},
        )
        .map(|_| ())
    })
    .expect_err("a mapping file outside the logdir")
    .to_string();
    assert!(
        err.contains("mapping.yaml") && err.contains("outside"),
        "{err}"
    );
}
