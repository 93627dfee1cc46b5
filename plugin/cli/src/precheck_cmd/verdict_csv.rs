//! Our verdicts as CSV (`graph_ascend_precheck_<YYYYmmddHHMMSS>.csv`, a file of ours beside
//! msprobe's, never extra columns in them): one row per API forward call of the target paired
//! with the golden's call (then the golden's calls that pair with none), each side's status,
//! reason, the dtype it ran in, and its worst output's ULP error, bias and budget. UTF-8 with a
//! byte-order mark and CR LF line ends, as msprobe's files, through the project's CSV writer.

use std::path::{Path, PathBuf};

use anyhow::Context;
use graph_ascend_diagnose::csv::csv_line;
use graph_ascend_replay::{CallReport, OutputReport, Status};

use super::graph_replay::Paired;
use super::msprobe_csv::BOM;

/// The columns of one side, after `Target ` or `Golden `.
const SIDE_COLUMNS: [&str; 14] = [
    "Status",
    "Reason",
    "Ran In",
    "Worst Output",
    "Max ULP",
    "Mean ULP",
    "Bias ULP",
    "Bias z",
    "Magnitude Bias ULP",
    "Magnitude Bias z",
    "Worst / Budget",
    "Elements Over Budget",
    "Verdict",
    "msprobe Status",
];

/// The header: the graph, both names, then each side's columns.
pub fn columns() -> Vec<String> {
    let mut out = vec![
        "Graph".to_string(),
        "Target Call".into(),
        "Golden Call".into(),
    ];
    for side in ["Target", "Golden"] {
        out.extend(SIDE_COLUMNS.iter().map(|c| format!("{side} {c}")));
    }
    out
}

/// Writes the paired rows of every graph into `dir`; returns the file's path.
pub fn write(
    dir: &Path,
    stamp: &str,
    graphs: &[(String, Vec<Paired<'_>>)],
) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut text = String::from(BOM);
    csv_line(&mut text, columns().iter().map(String::as_str));
    for (graph, pairs) in graphs {
        for p in pairs {
            let mut row = vec![
                graph.clone(),
                p.target.map(|c| c.name.clone()).unwrap_or_default(),
                p.golden.map(|c| c.name.clone()).unwrap_or_default(),
            ];
            row.extend(side_cells(p.target));
            row.extend(side_cells(p.golden));
            csv_line(&mut text, row.iter().map(String::as_str));
        }
    }
    let path = dir.join(format!("graph_ascend_precheck_{stamp}.csv"));
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// The output that decides a call: the one furthest past (or nearest to) its budget.
pub fn worst_output(c: &CallReport) -> Option<&OutputReport> {
    c.outputs.iter().max_by(|a, b| {
        a.ours
            .worst_budget_ratio
            .total_cmp(&b.ours.worst_budget_ratio)
    })
}

pub fn status_word(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Fail => "fail",
        Status::NotReplayed => "not replayed",
    }
}

fn side_cells(c: Option<&CallReport>) -> Vec<String> {
    let Some(c) = c else {
        return vec![String::new(); SIDE_COLUMNS.len()];
    };
    let mut reason = c.reason.clone().unwrap_or_default();
    for n in &c.notes {
        if !reason.is_empty() {
            reason.push_str("; ");
        }
        reason.push_str(n);
    }
    let mut cells = vec![
        status_word(c.status).to_string(),
        reason,
        c.ran_in.map(|d| d.to_string()).unwrap_or_default(),
    ];
    match worst_output(c) {
        Some(o) => {
            let u = &o.ours;
            cells.extend([
                o.index.to_string(),
                u.max_ulp.to_string(),
                u.mean_ulp.to_string(),
                u.bias_ulp.to_string(),
                u.bias_z.to_string(),
                u.magnitude_bias_ulp.to_string(),
                u.magnitude_bias_z.to_string(),
                u.worst_budget_ratio.to_string(),
                format!("{} of {}", u.over_budget, u.elements),
                u.why.clone(),
                o.msprobe.status.to_string(),
            ]);
        }
        None => cells.extend(vec![String::new(); SIDE_COLUMNS.len() - 3]),
    }
    cells
}
