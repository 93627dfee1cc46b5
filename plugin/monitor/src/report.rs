//! A pair's trend analysis as text, JSON or CSV: the first divergence, then one line per unit.
use std::fmt::Write;

use crate::divergence::{Divergence, Rule, UnitSummary};
use crate::run::Run;

/// Everything `graph-ascend trend` prints.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Trend {
    pub target: RunInfo,
    pub golden: RunInfo,
    pub reference: Option<(RunInfo, RunInfo)>,
    pub statistic: String,
    pub rule: Rule,
    pub ranks: Vec<u32>,
    pub target_only_ranks: Vec<u32>,
    pub golden_only_ranks: Vec<u32>,
    pub steps: Option<(i64, i64)>,
    pub rows: (u64, u64),
    pub unpaired_count: usize,
    pub unpaired: Vec<String>,
    pub paired_by_squash: usize,
    /// Where the order within a step came from.
    pub order: &'static str,
    pub first_divergence: Option<Divergence>,
    pub units: Vec<UnitSummary>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct RunInfo {
    pub path: String,
    pub format: crate::run::Format,
    pub ranks: usize,
}

impl RunInfo {
    pub fn of(run: &Run) -> RunInfo {
        RunInfo {
            path: run.path.display().to_string(),
            format: run.format,
            ranks: run.ranks.len(),
        }
    }
}

fn num(x: f64) -> String {
    if x.is_nan() {
        "-".to_string()
    } else {
        format!("{x:.3e}")
    }
}

fn unit_label(band: crate::pair::Band, stage: i32, name: &str) -> String {
    if stage == 0 {
        format!("{} {name}", band.name())
    } else {
        format!("{} {stage}:{name}", band.name())
    }
}

/// The human-readable report.
pub fn text(t: &Trend) -> String {
    let mut s = String::new();
    let run = |r: &RunInfo| format!("{} ({}, {} ranks)", r.path, r.format.name(), r.ranks);
    let _ = writeln!(s, "target: {}", run(&t.target));
    let _ = writeln!(s, "golden: {}", run(&t.golden));
    if let Some((a, b)) = &t.reference {
        let _ = writeln!(s, "reference: {} against {}", run(a), run(b));
    }
    let steps = t
        .steps
        .map_or("no steps".to_string(), |(a, b)| format!("steps {a}..{b}"));
    let _ = writeln!(
        s,
        "statistic {}; {steps}; ranks {:?} paired (worst rank per cell); {} units; order within a step: {}",
        t.statistic,
        t.ranks,
        t.units.len(),
        t.order
    );
    if !t.target_only_ranks.is_empty() || !t.golden_only_ranks.is_empty() {
        let _ = writeln!(
            s,
            "unpaired ranks: target only {:?}, golden only {:?}",
            t.target_only_ranks, t.golden_only_ranks
        );
    }
    if t.unpaired_count > 0 {
        let _ = writeln!(
            s,
            "{} target series without a golden partner, e.g. {}",
            t.unpaired_count,
            t.unpaired.join(", ")
        );
    }
    match &t.first_divergence {
        Some(d) => {
            let _ = writeln!(
                s,
                "first divergence: step {}, {} (module {}), rank {}: output differs by {}, input by {} (growth {} > threshold {}, noise median {}); {} of the next {} steps beyond",
                d.at.step,
                unit_label(d.band, d.stage, &d.name),
                d.module,
                d.at.rank,
                num(d.at.d_out),
                num(d.at.d_in),
                num(d.at.growth),
                num(d.at.threshold),
                num(d.at.median),
                d.at.stayed,
                t.rule.stay
            );
        }
        None => {
            let _ = writeln!(
                s,
                "first divergence: none (no unit's output outgrew its input beyond its noise)"
            );
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<12} {:<32} {:>6} {:>9} {:>9} {:>10} {:>9} {:>5}",
        "band", "module/parameter", "steps", "diverged", "exceeded", "max d_out", "at step", "rank"
    );
    for u in &t.units {
        let name = if u.stage == 0 {
            u.name.clone()
        } else {
            format!("{}:{}", u.stage, u.name)
        };
        let _ = writeln!(
            s,
            "{:<12} {:<32} {:>6} {:>9} {:>9} {:>10} {:>9} {:>5}",
            u.band.name(),
            name,
            u.steps,
            u.diverged.map_or("-".to_string(), |j| j.step.to_string()),
            u.exceeded,
            num(u.max_d_out),
            u.max_d_out_step,
            u.max_d_out_rank
        );
    }
    s
}

/// The whole analysis as JSON.
pub fn json(t: &Trend) -> String {
    serde_json::to_string_pretty(t).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One row per unit; `first_divergence` is 1 on the unit named first.
pub fn csv(t: &Trend) -> String {
    let mut s = String::from(
        "band,stage,name,module,steps,diverged_step,diverged_rank,d_in,d_out,growth,threshold,exceeded,max_d_out,max_d_out_step,max_d_out_rank,first_divergence\n",
    );
    let first = t.first_divergence.as_ref().map(|d| d.unit);
    for (i, u) in t.units.iter().enumerate() {
        let j = u.diverged;
        let opt = |f: fn(&crate::divergence::Judged) -> f64| {
            j.map_or(String::new(), |j| f(&j).to_string())
        };
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            u.band.name(),
            u.stage,
            csv_field(&u.name),
            csv_field(&u.module),
            u.steps,
            j.map_or(String::new(), |j| j.step.to_string()),
            j.map_or(String::new(), |j| j.rank.to_string()),
            opt(|j| j.d_in),
            opt(|j| j.d_out),
            opt(|j| j.growth),
            opt(|j| j.threshold),
            u.exceeded,
            u.max_d_out,
            u.max_d_out_step,
            u.max_d_out_rank,
            u8::from(first == Some(i))
        );
    }
    s
}
