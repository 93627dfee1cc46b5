//! Two runs side by side: ranks paired by number, series by name (exact, else through msprobe's
//! name squashing), steps by number. Each rank is read (both runs), compared and dropped before
//! the next: what stays is, per *unit* and step, the input and output difference of the rank
//! where the output outgrew the input most (the worst rank).
//!
//! A unit is something with an input and an output at every step:
//! - forward: a module; in `actv`, its inputs and its outputs;
//! - backward: a module; in `actv_grad`, the gradient of its outputs (what flows in) and of its
//!   inputs (what it computes);
//! - weight gradient: a parameter; `grad_unreduced` in, `grad_reduced` out (the reduction);
//! - optimizer: a parameter; `param_origin` in, `param_updated` out (the update).
//!
//! The difference of one tensor between the runs is the relative difference of the statistic,
//! `|t - g| / max(|t|, |g|)` (0 when both are 0); a unit's input (output) difference is the
//! largest of its inputs' (outputs'), over micro-steps too.
use std::collections::{BTreeSet, HashMap};

use crate::error::MonitorError;
use crate::name::{self, Kind, Role, SeriesKey};
use crate::rank_table::{RankTable, MAX_STEP_SPAN};
use crate::run::{Format, Run};

/// Where in a step a unit runs; steps are judged in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Band {
    Forward,
    Backward,
    WeightGrad,
    Optimizer,
}

impl Band {
    pub fn name(self) -> &'static str {
        match self {
            Band::Forward => "forward",
            Band::Backward => "backward",
            Band::WeightGrad => "weight_grad",
            Band::Optimizer => "optimizer",
        }
    }

    /// The band and side (input: false, output: true) of a series, if it belongs to a unit.
    fn of(key: &SeriesKey) -> Option<(Band, bool)> {
        match (key.kind, key.role) {
            (Kind::Actv, Role::Input(_)) => Some((Band::Forward, false)),
            (Kind::Actv, Role::Output(_)) => Some((Band::Forward, true)),
            // The backward of a module takes the gradient of its output and gives that of its input.
            (Kind::ActvGrad, Role::Output(_)) => Some((Band::Backward, false)),
            (Kind::ActvGrad, Role::Input(_)) => Some((Band::Backward, true)),
            (Kind::GradUnreduced, _) => Some((Band::WeightGrad, false)),
            (Kind::GradReduced, _) => Some((Band::WeightGrad, true)),
            (Kind::ParamOrigin, _) => Some((Band::Optimizer, false)),
            (Kind::ParamUpdated, _) => Some((Band::Optimizer, true)),
            _ => None,
        }
    }
}

/// A module (forward, backward) or parameter (weight gradient, optimizer) of the pair.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Unit {
    pub band: Band,
    pub stage: i32,
    /// The module or parameter name (the target's).
    pub name: String,
    /// The module: the name itself, or the parameter's module.
    pub module: String,
}

/// One unit at one step: the worst rank's differences. NaN when the step has no pair.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cell {
    pub d_in: f32,
    pub d_out: f32,
    pub rank: u32,
}

impl Cell {
    const EMPTY: Cell = Cell {
        d_in: f32::NAN,
        d_out: f32::NAN,
        rank: 0,
    };

    /// How much the output difference outgrew the input difference.
    pub fn growth(&self) -> f32 {
        self.d_out - self.d_in
    }

    pub fn is_empty(&self) -> bool {
        self.d_in.is_nan() || self.d_out.is_nan()
    }
}

#[derive(Clone, Debug, Default)]
struct Cells {
    first: i64,
    cells: Vec<Cell>,
}

/// Two runs compared: units in execution order with their cells.
#[derive(Clone, Debug)]
pub struct PairTable {
    pub statistic: String,
    /// Units in judging order: forward in execution order, backward in execution order, weight
    /// gradients, optimizer.
    pub units: Vec<Unit>,
    cells: Vec<Cells>,
    /// The ranks both runs have, and those only one has.
    pub ranks: Vec<u32>,
    pub target_only_ranks: Vec<u32>,
    pub golden_only_ranks: Vec<u32>,
    /// Target series with no golden partner (display names, at most [`MAX_LISTED`]) and how many.
    pub unpaired: Vec<String>,
    pub unpaired_count: usize,
    /// Series paired only through name squashing.
    pub paired_by_squash: usize,
    /// Rows read, target and golden.
    pub rows: (u64, u64),
}

/// How many unpaired names a [`PairTable`] lists.
pub const MAX_LISTED: usize = 20;

impl PairTable {
    /// The cell of unit `u` at `step`.
    pub fn cell(&self, u: usize, step: i64) -> Cell {
        let Some(c) = self.cells.get(u) else {
            return Cell::EMPTY;
        };
        usize::try_from(step - c.first)
            .ok()
            .and_then(|i| c.cells.get(i).copied())
            .unwrap_or(Cell::EMPTY)
    }

    /// The steps unit `u` spans (first, last).
    pub fn span(&self, u: usize) -> Option<(i64, i64)> {
        let c = self.cells.get(u)?;
        (!c.cells.is_empty()).then(|| (c.first, c.first + c.cells.len() as i64 - 1))
    }

    /// The steps of the whole pair (first, last).
    pub fn steps(&self) -> Option<(i64, i64)> {
        (0..self.units.len())
            .filter_map(|u| self.span(u))
            .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
    }

    /// The unit of `band`, `stage` and `name`, if the pair has it.
    pub fn find(&self, band: Band, stage: i32, name: &str) -> Option<usize> {
        self.units
            .iter()
            .position(|u| u.band == band && u.stage == stage && u.name == name)
    }
}

fn rel_diff(t: f32, g: f32) -> Option<f32> {
    if t.is_nan() || g.is_nan() {
        return None;
    }
    if t == g {
        return Some(0.0);
    }
    let scale = t.abs().max(g.abs());
    if scale.is_infinite() {
        return Some(1.0);
    }
    Some((t - g).abs() / scale)
}

/// The golden partner of each target series: the same key, else the same key with one name
/// the squashed form of the other (msprobe squashes with `squash_name`; a run made with it pairs
/// with one made without).
fn partners(target: &RankTable, golden: &RankTable) -> (Vec<Option<u32>>, usize) {
    let mut squashed: HashMap<SeriesKey, Option<u32>> = HashMap::new();
    for (id, key) in golden.series().iter().enumerate() {
        let mut k = key.clone();
        k.base = name::squash(&key.base).to_string();
        squashed
            .entry(k)
            .and_modify(|v| *v = None)
            .or_insert(Some(id as u32));
    }
    let mut by_squash = 0;
    let found = target
        .series()
        .iter()
        .map(|key| {
            if let Some(id) = golden.id(key) {
                return Some(id);
            }
            let mut k = key.clone();
            k.base = name::squash(&key.base).to_string();
            let id = golden.id(&k).or_else(|| {
                // The target squashed, golden not.
                squashed.get(key).copied().flatten()
            });
            by_squash += usize::from(id.is_some());
            id
        })
        .collect();
    (found, by_squash)
}

/// Reads one rank of a run into a table.
pub fn read_rank(run: &Run, rank: u32, stat: &str) -> Result<RankTable, MonitorError> {
    let mut table = RankTable::default();
    let path = run.ranks.get(&rank).ok_or_else(|| MonitorError::Pair {
        what: run.path.display().to_string(),
        problem: format!("no rank {rank}"),
    })?;
    match run.format {
        Format::V1 | Format::V2 => crate::csv_run::read_rank(run.format, path, stat, &mut table)?,
        Format::TrendDb => crate::trend_db::read_rank(path, rank, stat, &mut table)?,
    }
    Ok(table)
}

/// Compares `target` against `golden` on statistic `stat`, rank by rank; `progress` is told each
/// rank as it is done.
pub fn compare(
    target: &Run,
    golden: &Run,
    stat: &str,
    mut progress: impl FnMut(u32),
) -> Result<PairTable, MonitorError> {
    let t_ranks: BTreeSet<u32> = target.ranks.keys().copied().collect();
    let g_ranks: BTreeSet<u32> = golden.ranks.keys().copied().collect();
    let ranks: Vec<u32> = t_ranks.intersection(&g_ranks).copied().collect();
    if ranks.is_empty() {
        return Err(MonitorError::Pair {
            what: format!("{} and {}", target.path.display(), golden.path.display()),
            problem: format!(
                "no rank in common (target ranks {:?}, golden ranks {:?})",
                t_ranks, g_ranks
            ),
        });
    }
    let mut units: Vec<Unit> = Vec::new();
    // Per unit, its first-seen position within its band (for the order).
    let mut unit_index: HashMap<(Band, i32, String), usize> = HashMap::new();
    let mut cells: Vec<Cells> = Vec::new();
    let mut unpaired = BTreeSet::new();
    let mut paired_by_squash = 0;
    let mut rows = (0, 0);
    for &rank in &ranks {
        // The two runs' rank read side by side (two files, two cores).
        let (t, g) = std::thread::scope(|scope| {
            let t = scope.spawn(|| read_rank(target, rank, stat));
            let g = read_rank(golden, rank, stat);
            let t = t.join().unwrap_or_else(|_| {
                Err(MonitorError::Pair {
                    what: target.path.display().to_string(),
                    problem: format!("reading rank {rank} failed"),
                })
            });
            (t, g)
        });
        let (t, g) = (t?, g?);
        rows.0 += t.rows();
        rows.1 += g.rows();
        let (partner, by_squash) = partners(&t, &g);
        paired_by_squash = paired_by_squash.max(by_squash);
        // The series of each unit of this rank, input side and output side.
        let mut members: Vec<(usize, bool, u32, u32)> = Vec::new();
        for (tid, key) in t.series().iter().enumerate() {
            let Some(gid) = partner[tid] else {
                unpaired.insert(format!("{}:{}", key.kind.prefix(), key.display_name()));
                continue;
            };
            let Some((band, output)) = Band::of(key) else {
                continue;
            };
            let id = (band, key.stage, key.base.clone());
            let u = match unit_index.get(&id) {
                Some(&u) => u,
                None => {
                    let u = units.len();
                    units.push(Unit {
                        band,
                        stage: key.stage,
                        name: key.base.clone(),
                        module: match band {
                            Band::Forward | Band::Backward => key.base.clone(),
                            Band::WeightGrad | Band::Optimizer => {
                                name::module_of_param(&key.base).to_string()
                            }
                        },
                    });
                    cells.push(Cells::default());
                    unit_index.insert(id, u);
                    u
                }
            };
            members.push((u, output, tid as u32, gid));
        }
        members.sort_by_key(|m| m.0);
        for group in members.chunk_by(|a, b| a.0 == b.0) {
            let u = group[0].0;
            let Some((first, last)) = group
                .iter()
                .filter_map(|m| t.span(m.2))
                .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
            else {
                continue;
            };
            for step in first..=last {
                let mut d = [f32::NAN, f32::NAN];
                for &(_, output, tid, gid) in group {
                    if let (Some(tv), Some(gv)) = (t.get(tid, step), g.get(gid, step)) {
                        if let Some(x) = rel_diff(tv, gv) {
                            let slot = &mut d[usize::from(output)];
                            *slot = if slot.is_nan() { x } else { slot.max(x) };
                        }
                    }
                }
                let cell = Cell {
                    d_in: d[0],
                    d_out: d[1],
                    rank,
                };
                if !cell.is_empty() {
                    fold(&mut cells[u], step, cell).map_err(|_| MonitorError::Pair {
                        what: target.path.display().to_string(),
                        problem: format!("step {step} is too far from the other steps"),
                    })?;
                }
            }
        }
        progress(rank);
    }
    if units.is_empty() {
        return Err(MonitorError::Pair {
            what: format!("{} and {}", target.path.display(), golden.path.display()),
            problem: format!(
                "nothing to compare: no module or parameter of the target has a golden partner with values ({} target rows, {} golden rows of `{stat}`)",
                rows.0, rows.1
            ),
        });
    }
    // Judging order: band, then the order msprobe wrote the units in. A trend.db lost the
    // backward's order (see `trend_db`): its backward runs the forward's order reversed.
    let reversed_backward = target.format == Format::TrendDb;
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by_key(|&u| {
        let pos = u as i64;
        let pos = if reversed_backward && units[u].band == Band::Backward {
            -pos
        } else {
            pos
        };
        (units[u].band, pos)
    });
    let units_sorted = order.iter().map(|&u| units[u].clone()).collect();
    let cells_sorted = order
        .iter()
        .map(|&u| std::mem::take(&mut cells[u]))
        .collect();
    let unpaired_count = unpaired.len();
    Ok(PairTable {
        statistic: stat.to_string(),
        units: units_sorted,
        cells: cells_sorted,
        ranks,
        target_only_ranks: t_ranks.difference(&g_ranks).copied().collect(),
        golden_only_ranks: g_ranks.difference(&t_ranks).copied().collect(),
        unpaired: unpaired.into_iter().take(MAX_LISTED).collect(),
        unpaired_count,
        paired_by_squash,
        rows,
    })
}

/// Keeps in `c` at `step` whichever of the old and new cell grew most (the worst rank).
fn fold(c: &mut Cells, step: i64, cell: Cell) -> Result<(), ()> {
    if c.cells.is_empty() {
        c.first = step;
    }
    if step < c.first {
        let shift = c.first - step;
        if shift + c.cells.len() as i64 > MAX_STEP_SPAN {
            return Err(());
        }
        c.cells
            .splice(0..0, std::iter::repeat_n(Cell::EMPTY, shift as usize));
        c.first = step;
    }
    let at = step - c.first;
    if at >= MAX_STEP_SPAN {
        return Err(());
    }
    let at = at as usize;
    if at >= c.cells.len() {
        c.cells.resize(at + 1, Cell::EMPTY);
    }
    let old = c.cells[at];
    if old.is_empty() || cell.growth() > old.growth() {
        c.cells[at] = cell;
    }
    Ok(())
}
