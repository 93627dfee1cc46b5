//! `graph-ascend trend` on real msprobe 26.2 monitor output (tests/fixtures/monitor): text, JSON
//! and CSV; exit status 1 when the runs part (at the fault's step and module, from the
//! fixtures' faults.json), 0 when they do not, 2 on an error.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/monitor")
}

fn unpacked() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        for archive in ["monitor_v1.tar.xz", "monitor_trend.tar.xz"] {
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

fn v1(run: &str) -> String {
    unpacked()
        .join("v1")
        .join(run)
        .to_str()
        .unwrap()
        .to_string()
}

fn trend(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graph-ascend"))
        .arg("trend")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The fault of `run` from faults.json: (step, band, module).
fn fault(run: &str) -> (i64, String, String) {
    let text = std::fs::read_to_string(fixtures().join("faults.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let f = &v["runs"][run]["fault"];
    (
        f["step"].as_i64().unwrap(),
        f["band"].as_str().unwrap().to_string(),
        f["module"].as_str().unwrap().to_string(),
    )
}

#[test]
fn a_fault_is_named_in_text_json_and_csv() {
    let (step, band, module) = fault("fault_grad");
    let (t, g) = (v1("fault_grad"), v1("golden"));
    let o = trend(&["-t", &t, "-g", &g]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}{}",
        stdout(&o),
        String::from_utf8_lossy(&o.stderr)
    );
    let text = stdout(&o);
    assert!(
        text.contains(&format!(
            "first divergence: step {step}, {band} {module} (module {module})"
        )),
        "{text}"
    );
    assert!(text.contains("ranks [0, 1] paired"), "{text}");

    let o = trend(&["-t", &t, "-g", &g, "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let d = &v["first_divergence"];
    assert_eq!(d["step"].as_i64(), Some(step));
    assert_eq!(d["band"].as_str(), Some(band.as_str()));
    assert_eq!(d["module"].as_str(), Some(module.as_str()));
    assert!(d["growth"].as_f64().unwrap() > d["threshold"].as_f64().unwrap());

    let o = trend(&["-t", &t, "-g", &g, "--format", "csv"]);
    assert_eq!(o.status.code(), Some(1));
    let csv = stdout(&o);
    let named: Vec<&str> = csv.lines().filter(|l| l.ends_with(",1")).collect();
    assert_eq!(named.len(), 1, "{csv}");
    assert!(
        named[0].starts_with(&format!("{band},0,{module},{module},")),
        "{}",
        named[0]
    );
}

#[test]
fn noise_only_pairs_exit_zero_with_and_without_a_reference() {
    let o = trend(&["-t", &v1("noise_bf16"), "-g", &v1("golden")]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("first divergence: none"));
    let o = trend(&[
        "-t",
        &v1("noise_bf16"),
        "-g",
        &v1("golden"),
        "--reference-target",
        &v1("noise_seed"),
        "--reference-golden",
        &v1("golden"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("reference: "), "{}", stdout(&o));
}

#[test]
fn a_trend_db_is_read_like_its_csvs() {
    let (step, band, module) = fault("fault_weight");
    let db = |run: &str| {
        unpacked()
            .join("trend")
            .join(run)
            .join("monitor_data.trend.db")
            .to_str()
            .unwrap()
            .to_string()
    };
    let o = trend(&["-t", &db("fault_weight"), "-g", &db("golden")]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains(&format!("first divergence: step {step}, {band} {module} ")),
        "{}",
        stdout(&o)
    );
}

#[test]
fn errors_exit_two_and_name_the_problem() {
    let o = trend(&["-t", "/nonexistent/monitor", "-g", &v1("golden")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/monitor"));
    let o = trend(&[
        "-t",
        &v1("golden"),
        "-g",
        &v1("golden"),
        "--statistic",
        "mean",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no statistic `mean`"));
}
