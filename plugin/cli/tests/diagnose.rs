//! `graph-ascend diagnose` and `graph-ascend export-csv`, run as the user runs them.

use std::process::Output;

mod common;
use common::{convert_48_layer_pair, diagnose_json_both_ways, fixtures, ga, unpack};

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn text_json_and_csv_name_the_injected_faults() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_stats", dir.path());
    let db = db.to_str().unwrap();

    let text = ga(&["diagnose", db]);
    assert_eq!(text.status.code(), Some(1), "{}", stderr(&text));
    let out = stdout(&text);
    assert!(
        out.contains("1. rank 0 Functional.layer_norm.3.forward"),
        "{out}"
    );
    assert!(
        out.contains("argument eps differs: 0.1 vs golden 1e-05; inputs are equal"),
        "{out}"
    );
    assert!(
        out.contains("inside: Module.layers.1.ln2.LayerNorm.forward.0"),
        "{out}"
    );
    assert!(
        out.contains("2. rank 0 Functional.linear.10.forward"),
        "{out}"
    );

    let json = ga(&["diagnose", db, "--format", "json", "--top", "1"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(v["step"], 0);
    assert_eq!(v["sources"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["sources"][0]["node"], "Functional.layer_norm.3.forward");
    assert_eq!(v["sources"][0]["causes"][0]["kind"], "argument");
    assert_eq!(v["sources"][0]["causes"][0]["name"], "eps");

    let csv = ga(&[
        "diagnose", db, "--format", "csv", "--rank", "0", "--step", "0",
    ]);
    let out = stdout(&csv);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "rank,step,direction,kind,node,golden_node,score,reason,enclosing,micro_step,group,fault"
    );
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[2].starts_with("0,0,forward,cause,Functional.linear.10.forward,"));
}

#[test]
fn a_fault_free_pair_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_ms_vs_pt_lm_bare", dir.path());
    let o = ga(&["diagnose", db.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("no source of error above the noise"));
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let build = unpack("build_tf_stats", dir.path());
    let o = ga(&["diagnose", build.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a compare file"), "{}", stderr(&o));

    // Regression (issue 42, item 12): an absent file, given or as --reference, was "not a
    // msprobe .vis.db: not a regular file".
    let missing = dir.path().join("missing.vis.db");
    let o = ga(&["diagnose", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!("{}: no such file", missing.display())),
        "{}",
        stderr(&o)
    );

    let db = unpack("compare_tf_stats", dir.path());
    let db = db.to_str().unwrap();
    let o = ga(&["diagnose", db, "--reference", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("{}: no such file", missing.display())),
        "{err}"
    );
    assert!(!err.contains("not a msprobe .vis.db"), "{err}");
    let o = ga(&["diagnose", db, "--step", "5"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no step 5 (the file has steps [0])"),
        "{}",
        stderr(&o)
    );
    let o = ga(&["diagnose", db, "--rank", "2"]);
    assert!(stderr(&o).contains("no rank 2"), "{}", stderr(&o));
    let o = ga(&["diagnose", db, "--tolerance", "float32=1e-2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("DTYPE=AGREE:JUMP"), "{}", stderr(&o));
    let o = ga(&["export-csv", db, "--rank", "4"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no rank 4"), "{}", stderr(&o));
}

/// msprobe's structure-only compare holds no data: diagnose says so plainly (exit status 2),
/// with --map too.
#[test]
fn a_structure_only_file_has_nothing_to_diagnose() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_structure", dir.path());
    let db = db.to_str().unwrap();
    for args in [vec!["diagnose", db], vec!["diagnose", db, "--map"]] {
        let o = ga(&args);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!(
                "{db}: a structure-only comparison (task \"structure\"): its dumps hold the \
                 model's structure but no data, so there is nothing to diagnose"
            )),
            "{}",
            stderr(&o)
        );
        assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    }
}

#[test]
fn tolerances_can_be_overridden() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_stats", dir.path());
    // With float32 noise allowed up to 30% and the table used as given (not tightened from the
    // compare: its five layer_norm calls agree exactly, so tightening would judge the 2.4% eps
    // change by float32's own floor), the LayerNorm change is noise; the weight that differs by 58%
    // (and the output with it, by 42%) is still a cause.
    let o = ga(&[
        "diagnose",
        db.to_str().unwrap(),
        "--format",
        "json",
        "--tolerance",
        "float32=0.3:0.3",
        "--fixed-tolerances",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let nodes: Vec<&str> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["node"].as_str())
        .collect();
    assert_eq!(nodes, vec!["Functional.linear.10.forward"], "{v}");
}

/// The fields of a CSV text (RFC 4180: quoted fields may hold commas, quotes and line breaks).
fn csv_cells(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut cell) = (Vec::new(), Vec::new(), String::new());
    let (mut quoted, mut chars) = (false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => cell.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut cell)),
            (false, '\r') if chars.peek() == Some(&'\n') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => cell.push(c),
        }
    }
    rows
}

/// Regression (issue 42, item 7): node names and dtypes from a dump went verbatim into CSV
/// cells, and a spreadsheet ran them (`=HYPERLINK(…)`, `+cmd|…`, `@SUM(…)`, `-2+3+cmd|…`). A
/// compare whose node names and a dtype are formulas: every CSV writer (`export-csv`, the one
/// the page's download uses too, `diagnose --format csv` and `diagnose --map --format csv`)
/// writes them with a leading `'`, and its negative numbers as numbers.
#[test]
fn no_csv_cell_is_a_formula() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_stats", dir.path());
    let renames = [
        ("Functional.layer_norm.3.forward", "=HYPERLINK(x)"),
        ("Functional.linear.10.forward", "+cmd|' /C calc'!A0"),
        ("Module.layers.1.ln2.LayerNorm.forward.0", "@SUM(A1:A2)"),
        (
            "Module.layers.1.LlamaDecoderLayer.forward.0",
            "-2+3+cmd|' /C calc'!A0",
        ),
    ];
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        for (old, new) in renames {
            let n = conn
                .execute(
                    "UPDATE tb_nodes SET node_name = replace(node_name, ?1, ?2), \
                     up_node = replace(up_node, ?1, ?2), sub_nodes = replace(sub_nodes, ?1, ?2), \
                     matched_node_link = replace(matched_node_link, ?1, ?2), \
                     input_data = replace(input_data, ?1, ?2), \
                     output_data = replace(output_data, ?1, ?2)",
                    [old, new],
                )
                .unwrap();
            assert!(n > 0, "{old} is in the fixture");
        }
        conn.execute(
            "UPDATE tb_nodes SET input_data = replace(input_data, '\"torch.float32\"', \
             '\"=1+1\"') WHERE node_name = '+cmd|'' /C calc''!A0'",
            [],
        )
        .unwrap();
    }
    let db = db.to_str().unwrap();
    let dest = dir.path().join("pairs.csv");
    let export = ga(&["export-csv", db, "-o", dest.to_str().unwrap()]);
    assert!(export.status.success(), "{}", stderr(&export));
    let diagnosed = ga(&["diagnose", db, "--format", "csv"]);
    let mapped = ga(&["diagnose", db, "--map", "--format", "csv"]);
    for (what, text) in [
        ("export-csv", std::fs::read_to_string(&dest).unwrap()),
        ("diagnose --format csv", stdout(&diagnosed)),
        ("diagnose --map --format csv", stdout(&mapped)),
    ] {
        let rows = csv_cells(&text);
        assert!(rows.len() > 1, "{what}: {text}");
        let cells: Vec<&String> = rows.iter().flatten().collect();
        for cell in &cells {
            let risky = cell.starts_with(['=', '+', '-', '@', '\t', '\r']);
            assert!(
                !risky || cell.parse::<f64>().is_ok(),
                "{what}: a formula cell {cell:?}"
            );
        }
        let guarded = cells.iter().filter(|c| c.starts_with("'")).count();
        assert!(guarded > 0, "{what}: the renamed nodes are there: {text}");
        if what == "export-csv" {
            // The leaves' rows (the module's rows are those of its matched data, if any).
            for (_, new) in &renames[..3] {
                assert!(
                    cells.iter().any(|c| c.starts_with(&format!("'{new}"))),
                    "{what}: {new}"
                );
            }
            assert!(cells.iter().any(|c| *c == "'=1+1"), "{what}: the dtype");
            assert!(
                cells
                    .iter()
                    .any(|c| c.starts_with('-') && c.parse::<f64>().is_ok()),
                "{what}: negative numbers stay numbers"
            );
        }
    }
}

/// Regression (issue 42, item 12): `export-csv -o` wrote its file with mode 0600, where the
/// other outputs get the mode of any new file (0666 less the umask).
#[test]
fn export_csv_follows_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_md5", dir.path());
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "x").unwrap();
    let dest = dir.path().join("pairs.csv");
    let o = ga(&[
        "export-csv",
        db.to_str().unwrap(),
        "-o",
        dest.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dest), mode(&plain));
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        left.len(),
        3,
        "the case, plain, the CSV and nothing else: {left:?}"
    );
}

#[test]
fn export_csv_writes_a_file_or_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpack("compare_tf_md5", dir.path());
    let db = db.to_str().unwrap();
    let dest = dir.path().join("pairs.csv");
    let o = ga(&["export-csv", db, "-o", dest.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&dest).unwrap();
    assert!(text.starts_with("Step,Rank,NPU Node,Bench Node,Role,NPU Name,"));
    assert!(text.lines().count() > 300);
    let o = ga(&["export-csv", db, "--step", "0"]);
    assert_eq!(stdout(&o), text);
}

#[test]
fn the_first_step_that_differs_is_reported() {
    // Target: step 0 of the fault-free MindSpore run, step 1 of the perturbed one; golden: the
    // fault-free run. Step 0 agrees exactly, so step 1 is the answer.
    let dir = tempfile::tempdir().unwrap();
    let dumps = fixtures().join("dumps");
    let target = dir.path().join("target");
    std::fs::create_dir(&target).unwrap();
    std::os::unix::fs::symlink(dumps.join("ms_stats_a/step0"), target.join("step0")).unwrap();
    std::os::unix::fs::symlink(dumps.join("ms_stats_b/step1"), target.join("step1")).unwrap();
    let out = dir.path().join("out");
    let o = ga(&[
        "convert",
        "-tp",
        target.to_str().unwrap(),
        "-gp",
        dumps.join("ms_stats_a").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let db = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".vis.db"))
        .expect("a .vis.db");
    let o = ga(&["diagnose", db.to_str().unwrap(), "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["step"], 1, "{v}");
    assert_eq!(v["steps_checked"][0]["step"], 0);
    assert_eq!(v["steps_checked"][0]["forward_differs"], false);
    assert_eq!(v["steps_checked"][1]["forward_differs"], true);
    assert!(!v["sources"].as_array().unwrap().is_empty());
    // Asking for step 0 gives its (empty) answer.
    let o = ga(&["diagnose", db.to_str().unwrap(), "--step", "0"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

/// The real 48-layer pair (`tests/fixtures/big`: 8 micro-batches, an `eps` argument and a weight
/// changed) converted as a user would: exactly its 2 faults, each one group of 8 micro-batches.
#[test]
fn the_48_layer_pair_gives_its_two_faults_as_two_groups_of_eight_micro_batches() {
    let dir = tempfile::tempdir().unwrap();
    let db = convert_48_layer_pair(dir.path());
    // The same read from our own diagnosis table and from the rows.
    let run = diagnose_json_both_ways(&db);
    let v: serde_json::Value = serde_json::from_slice(&run.stdout).expect("JSON");
    let groups = v["groups"].as_array().expect("groups");
    let summaries: Vec<&str> = groups
        .iter()
        .filter_map(|g| g["summary"].as_str())
        .collect();
    assert_eq!(groups.len(), 2, "{summaries:#?}");
    assert_eq!(
        groups[0]["site"]["api"], "Functional.layer_norm",
        "{summaries:#?}"
    );
    assert_eq!(
        groups[1]["site"]["api"], "Functional.linear",
        "{summaries:#?}"
    );
    for g in groups {
        assert_eq!(g["occurrences"], 8, "{summaries:#?}");
        assert_eq!(
            g["micro_steps"],
            serde_json::json!([0, 1, 2, 3, 4, 5, 6, 7]),
            "{summaries:#?}"
        );
    }
    assert_eq!(
        summaries[1],
        "`Functional.linear` (1st call) in `layers.2.mlp.fc1` — weight differs — 8 micro-batches, \
         rank 0, step 0"
    );
    // Nothing else: every source belongs to one of the two.
    assert_eq!(v["sources"].as_array().map(Vec::len), Some(16));
}
