//! msprobe's training-state monitor, two runs side by side: its output read as it is written
//! (v1 `TrainerMon` CSVs, v2 `TrainerMonitorV2` CSVs, `msprobe data2db`'s `*.trend.db`), any
//! number of ranks and steps, one rank in memory at a time; two runs paired by rank, module or
//! parameter name and step; and the first step and module where they part (docs/monitor.md).
//!
//! ```no_run
//! use graph_ascend_monitor::{analyze, Rule, Run};
//! let target = Run::open("target_monitor".as_ref())?;
//! let golden = Run::open("golden_monitor".as_ref())?;
//! let trend = analyze(&target, &golden, None, "norm", &Rule::default(), |_| {})?;
//! if let Some(d) = &trend.first_divergence {
//!     println!("step {} module {}", d.at.step, d.module);
//! }
//! # Ok::<(), graph_ascend_monitor::MonitorError>(())
//! ```
//!
//! # Layout
//! - [`run`]: a run on disk: its format and rank folders (or database).
//! - [`name`]: what a row names: kind, stage, module or parameter, input or output; msprobe's
//!   `vpp:` prefix and name squashing.
//! - [`csv_line`]: CSV lines with quoting, a torn last line skipped.
//! - [`csv_run`]: a v1 or v2 rank folder read into a [`rank_table::RankTable`].
//! - [`trend_db`]: a trend.db's rank read the same way.
//! - [`rank_table`]: one rank's statistic per series and step, compact.
//! - [`pair`]: two runs compared rank by rank into units' input and output differences.
//! - [`divergence`]: the rule that names the first divergence.
//! - [`report`]: the analysis as text, JSON, CSV.
pub mod csv_line;
pub mod csv_run;
pub mod divergence;
pub mod error;
pub mod name;
pub mod pair;
pub mod rank_table;
pub mod report;
pub mod run;
pub mod trend_db;

pub use divergence::{Divergence, Rule, UnitSummary};
pub use error::MonitorError;
pub use pair::{Band, PairTable};
pub use report::Trend;
pub use run::{Format, Run};

/// Compares `target` against `golden` on `statistic` (a column of the monitor's ops, `norm` by
/// default in the command) and judges every unit; `reference` is an optional pair of correct
/// runs whose growth is natural drift. `progress` is told each rank compared (of the target
/// pair).
pub fn analyze(
    target: &Run,
    golden: &Run,
    reference: Option<(&Run, &Run)>,
    statistic: &str,
    rule: &Rule,
    progress: impl FnMut(u32),
) -> Result<Trend, MonitorError> {
    let table = pair::compare(target, golden, statistic, progress)?;
    let reference_table = match reference {
        Some((a, b)) => Some(pair::compare(a, b, statistic, |_| {})?),
        None => None,
    };
    let units = divergence::judge(&table, reference_table.as_ref(), rule);
    let first_divergence = divergence::first_divergence(&units);
    Ok(Trend {
        target: report::RunInfo::of(target),
        golden: report::RunInfo::of(golden),
        reference: reference.map(|(a, b)| (report::RunInfo::of(a), report::RunInfo::of(b))),
        statistic: statistic.to_string(),
        rule: *rule,
        ranks: table.ranks.clone(),
        target_only_ranks: table.target_only_ranks.clone(),
        golden_only_ranks: table.golden_only_ranks.clone(),
        steps: table.steps(),
        rows: table.rows,
        unpaired_count: table.unpaired_count,
        unpaired: table.unpaired.clone(),
        paired_by_squash: table.paired_by_squash,
        order: match target.format {
            Format::TrendDb => "the trend.db's target order (backward: the forward's reversed)",
            Format::V1 | Format::V2 => "the CSV's order",
        },
        first_divergence,
        units,
    })
}
