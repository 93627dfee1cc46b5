//! The first divergence of a pair: the earliest step, and in it the earliest unit in judging
//! order (forward in execution order, backward, weight gradients, optimizer), whose output
//! difference outgrew its input difference beyond the noise of its own history, and kept doing
//! so (docs/monitor.md gives the rule and why).
//!
//! For a unit the *growth* at step s is `d_out(s) - d_in(s)` (the worst rank's, see
//! [`crate::pair`]). Its noise is learned from the pair itself: the growth of the previous
//! `window` steps (at least `min_history` of them), as median and robust spread
//! (1.4826 × median absolute deviation). Step s *exceeds* when its growth is above
//! `median + max(k × spread, floor)`; it *diverges* when, with that threshold held fixed, at
//! least `stay_needed` of the `stay` steps from s on exceed too. With a reference pair (two
//! correct runs, e.g. other seeds or other numerics), the threshold is also at least the
//! largest growth the reference's same unit shows from `window` steps before s to `stay` steps
//! after: the natural drift of correct runs at that point of training.
use crate::pair::{Band, Cell, PairTable};

/// The rule's numbers (see the module's doc).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Rule {
    pub window: usize,
    pub min_history: usize,
    pub k: f64,
    pub floor: f64,
    pub stay: usize,
    pub stay_needed: usize,
}

impl Default for Rule {
    fn default() -> Rule {
        Rule {
            window: 50,
            min_history: 50,
            k: 10.0,
            floor: 1e-6,
            stay: 10,
            stay_needed: 8,
        }
    }
}

/// One step of one unit judged.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Judged {
    pub step: i64,
    pub rank: u32,
    pub d_in: f64,
    pub d_out: f64,
    pub growth: f64,
    /// The noise's median and the threshold the growth was held to.
    pub median: f64,
    pub threshold: f64,
    /// Steps of the `stay` window from this one that exceeded the threshold.
    pub stayed: usize,
}

/// Where the pair parts.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Divergence {
    pub unit: usize,
    pub band: Band,
    pub stage: i32,
    pub name: String,
    pub module: String,
    #[serde(flatten)]
    pub at: Judged,
}

/// A unit over the whole pair.
#[derive(Clone, Debug, serde::Serialize)]
pub struct UnitSummary {
    pub band: Band,
    pub stage: i32,
    pub name: String,
    pub module: String,
    /// Steps with a pair.
    pub steps: usize,
    /// Its first diverging step (the rule), if any.
    pub diverged: Option<Judged>,
    /// Steps whose growth exceeded the threshold.
    pub exceeded: usize,
    /// The largest output difference and where.
    pub max_d_out: f64,
    pub max_d_out_step: i64,
    pub max_d_out_rank: u32,
}

fn median(v: &mut [f64]) -> f64 {
    let mid = v.len() / 2;
    let (_, m, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
    let m = *m;
    if v.len() % 2 == 1 {
        m
    } else {
        let lower = v[..mid].iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lower + m) / 2.0
    }
}

/// The growth series of unit `u` of `table` over `first..=last` (NaN where no pair).
fn growths(table: &PairTable, u: usize, first: i64, last: i64) -> Vec<f64> {
    (first..=last)
        .map(|s| {
            let c: Cell = table.cell(u, s);
            if c.is_empty() {
                f64::NAN
            } else {
                f64::from(c.growth())
            }
        })
        .collect()
}

/// Judges unit `u`: its summary, with its first diverging step.
pub fn judge_unit(
    table: &PairTable,
    u: usize,
    reference: Option<&PairTable>,
    rule: &Rule,
) -> Option<UnitSummary> {
    let unit = table.units.get(u)?;
    let (first, last) = table.span(u)?;
    let g = growths(table, u, first, last);
    let reference_growth = reference.and_then(|r| {
        let ru = r.find(unit.band, unit.stage, &unit.name)?;
        Some(growths(r, ru, first, last))
    });
    let mut summary = UnitSummary {
        band: unit.band,
        stage: unit.stage,
        name: unit.name.clone(),
        module: unit.module.clone(),
        steps: g.iter().filter(|x| !x.is_nan()).count(),
        diverged: None,
        exceeded: 0,
        max_d_out: f64::NAN,
        max_d_out_step: first,
        max_d_out_rank: 0,
    };
    let mut history: Vec<f64> = Vec::with_capacity(rule.window);
    for (i, &growth) in g.iter().enumerate() {
        let step = first + i as i64;
        let cell = table.cell(u, step);
        if cell.is_empty() {
            continue;
        }
        let d_out = f64::from(cell.d_out);
        if summary.max_d_out.is_nan() || d_out > summary.max_d_out {
            summary.max_d_out = d_out;
            summary.max_d_out_step = step;
            summary.max_d_out_rank = cell.rank;
        }
        history.clear();
        history.extend(
            g[i.saturating_sub(rule.window)..i]
                .iter()
                .copied()
                .filter(|x| x.is_finite()),
        );
        if history.len() < rule.min_history.max(1) {
            continue;
        }
        let med = median(&mut history);
        for x in history.iter_mut() {
            *x = (*x - med).abs();
        }
        let spread = 1.4826 * median(&mut history);
        let mut threshold = med + (rule.k * spread).max(rule.floor);
        if let Some(rg) = &reference_growth {
            let around = &rg[i.saturating_sub(rule.window)..(i + rule.stay).min(rg.len())];
            if let Some(m) = around
                .iter()
                .copied()
                .filter(|x| x.is_finite())
                .reduce(f64::max)
            {
                threshold = threshold.max(m);
            }
        }
        if growth.is_nan() || growth <= threshold {
            continue;
        }
        summary.exceeded += 1;
        if summary.diverged.is_some() {
            continue;
        }
        let stayed = g[i..(i + rule.stay).min(g.len())]
            .iter()
            .filter(|&&x| x > threshold)
            .count();
        if stayed >= rule.stay_needed {
            summary.diverged = Some(Judged {
                step,
                rank: cell.rank,
                d_in: f64::from(cell.d_in),
                d_out,
                growth,
                median: med,
                threshold,
                stayed,
            });
        }
    }
    Some(summary)
}

/// Every unit judged, in judging order.
pub fn judge(table: &PairTable, reference: Option<&PairTable>, rule: &Rule) -> Vec<UnitSummary> {
    (0..table.units.len())
        .filter_map(|u| judge_unit(table, u, reference, rule))
        .collect()
}

/// The first divergence among judged units: the earliest step, then the earliest unit.
pub fn first_divergence(summaries: &[UnitSummary]) -> Option<Divergence> {
    summaries
        .iter()
        .enumerate()
        .filter_map(|(u, s)| s.diverged.map(|j| (u, s, j)))
        .min_by_key(|(u, _, j)| (j.step, *u))
        .map(|(unit, s, at)| Divergence {
            unit,
            band: s.band,
            stage: s.stage,
            name: s.name.clone(),
            module: s.module.clone(),
            at,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
