//! The compare CSV: msprobe's columns, one row per input, parameter and output of each pair.

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
         Bench l2norm,Requires_grad Consistent,Result,Err_message"
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
    assert!(md5
        .lines()
        .next()
        .unwrap()
        .ends_with("NPU MD5,BENCH MD5,Requires_grad Consistent,Result,Err_message"));
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
