//! The compare CSV: msprobe's columns, one row per input, parameter and output of each pair,
//! then each node's diagnosis.

mod common;

use common::unpack;
use graph_ascend_diagnose::export::{write_csv, write_csv_file};
use graph_ascend_diagnose::CompareFile;

fn csv_of(case: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = CompareFile::open(&unpack(case, dir.path())).unwrap();
    let mut out = Vec::new();
    let rows = write_csv(&file, None, None, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.lines().count(), rows + 1);
    text
}

#[test]
fn statistics_csv_has_msprobes_summary_columns() {
    let text = csv_of("compare_tf_stats");
    let header = text.lines().next().unwrap();
    assert_eq!(
        header,
        "Step,Rank,NPU Node,Bench Node,Role,NPU Name,Bench Name,NPU Dtype,Bench Dtype,\
         NPU Tensor Shape,Bench Tensor Shape,NPU Requires_grad,Bench Requires_grad,Max diff,\
         Min diff,Mean diff,L2norm diff,MaxRelativeErr,MinRelativeErr,MeanRelativeErr,\
         NormRelativeErr,NPU max,NPU min,NPU mean,NPU l2norm,Bench max,Bench min,Bench mean,\
         Bench l2norm,Requires_grad Consistent,Result,Err_message,\
         Diagnosis,Diagnosis Score,Diagnosis Reason"
    );
    // fc1 of layer 2: its input, its two parameters, its output.
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(",Module.layers.2.mlp.fc1.Linear.forward.0,"))
        .collect();
    assert_eq!(rows.len(), 4, "{rows:#?}");
    let weight = rows
        .iter()
        .find(|r| r.contains(".parameters.weight,"))
        .expect("weight row");
    assert!(weight.contains(",parameter,"), "{weight}");
    assert!(weight.contains("21.755465%"), "{weight}");
}

#[test]
fn md5_and_tensor_csvs_have_their_modes_columns() {
    let md5 = csv_of("compare_tf_md5");
    assert!(md5.lines().next().unwrap().ends_with(
        "NPU MD5,BENCH MD5,Requires_grad Consistent,Result,Err_message,\
             Diagnosis,Diagnosis Score,Diagnosis Reason"
    ));
    let tensor = csv_of("compare_tf_small_tensor");
    let header = tensor.lines().next().unwrap();
    assert!(header.contains(
        "Cosine,EucDist,MaxAbsErr,MaxRelativeErr,One Thousandth Err Ratio,Five Thousandths Err Ratio,NPU max"
    ), "{header}");
}

#[test]
fn a_file_export_is_written_whole_and_the_selection_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let file = CompareFile::open(&unpack("compare_dist_ranks", dir.path())).unwrap();
    let dest = dir.path().join("pairs.csv");
    let rows = write_csv_file(&file, Some(0), Some(1), &dest).unwrap();
    let text = std::fs::read_to_string(&dest).unwrap();
    assert_eq!(text.lines().count(), rows + 1);
    assert!(text.lines().skip(1).all(|l| l.starts_with("0,1,")));
    // An unknown rank leaves the existing file as it was.
    let err = write_csv_file(&file, None, Some(9), &dest).unwrap_err();
    assert!(err.to_string().contains("no rank 9"), "{err}");
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), text);
}

/// The cells of the rows of `node` (as its `NPU Node`), by column name.
fn rows_of(text: &str, node: &str) -> Vec<std::collections::HashMap<String, String>> {
    let mut reader = csv_fields(text);
    let header = reader.remove(0);
    reader
        .into_iter()
        .filter(|r| r.get(2).is_some_and(|n| n == node))
        .map(|r| header.iter().cloned().zip(r).collect())
        .collect()
}

/// RFC 4180 records (quoted fields with commas, quotes and line breaks).
fn csv_fields(text: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            ('"', true) => quoted = false,
            ('"', false) => quoted = true,
            (',', false) => record.push(std::mem::take(&mut field)),
            ('\r', false) => {}
            ('\n', false) => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            _ => field.push(c),
        }
    }
    records
}

/// The demo's compare: two injected faults (layer 1's LayerNorm eps, layer 2's fc1 weight).
/// Every row of a node carries its verdict, score and reason, as `graph-ascend diagnose` says it.
#[test]
fn every_row_carries_its_nodes_diagnosis() {
    let text = csv_of("compare_tf_stats");
    let cell = |node: &str, col: &str| -> Vec<String> {
        rows_of(&text, node)
            .iter()
            .map(|r| r[col].clone())
            .collect()
    };
    let source = "Functional.linear.10.forward";
    assert!(!cell(source, "Diagnosis").is_empty());
    assert!(cell(source, "Diagnosis").iter().all(|v| v == "cause"));
    let reasons = cell(source, "Diagnosis Reason");
    assert!(
        reasons
            .iter()
            .all(|r| r.contains("parameter weight differs")),
        "{reasons:?}"
    );
    // The module that is a source only through it.
    let module = cell(
        "Module.layers.2.mlp.fc1.Linear.forward.0",
        "Diagnosis Reason",
    );
    assert!(
        module
            .iter()
            .all(|r| r.starts_with(&format!("holds the source {source}: "))),
        "{module:?}"
    );
    assert!(cell("Functional.layer_norm.3.forward", "Diagnosis")
        .iter()
        .all(|v| v == "cause"));
    // Downstream of the first fault: inherited, with why; before it: agrees, no reason.
    assert!(cell("Functional.linear.11.forward", "Diagnosis")
        .iter()
        .all(|v| v == "inherited"));
    assert!(cell("Functional.linear.11.forward", "Diagnosis Reason")
        .iter()
        .all(|r| r.contains("inputs already differ")));
    assert!(cell("Functional.linear.0.forward", "Diagnosis")
        .iter()
        .all(|v| v == "agrees"));
    assert!(cell("Functional.linear.0.forward", "Diagnosis Reason")
        .iter()
        .all(String::is_empty));
    let scores = cell("Functional.linear.11.forward", "Diagnosis Score");
    assert!(
        scores.iter().all(|s| s.parse::<f64>().is_ok()),
        "a score is a number: {scores:?}"
    );
    // Every row has as many fields as the header.
    let records = csv_fields(&text);
    assert!(records.iter().all(|r| r.len() == records[0].len()));
}

/// msprobe stores a `None` argument as `{"value": "null"}`: its row says `None` instead of
/// being blank (the embedding's `padding_idx` and `max_norm`).
#[test]
fn a_none_argument_says_so() {
    let text = csv_of("compare_tf_stats");
    let rows = rows_of(&text, "Functional.embedding.0.forward");
    let none: Vec<_> = rows
        .iter()
        .filter(|r| r["NPU Name"].ends_with(".input.2") || r["NPU Name"].ends_with(".input.3"))
        .collect();
    assert_eq!(none.len(), 2, "{rows:#?}");
    for r in none {
        assert_eq!(r["NPU Dtype"], "None", "{r:?}");
        assert_eq!(r["Bench Dtype"], "None", "{r:?}");
    }
}
