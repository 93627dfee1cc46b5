//! The divergence map: the whole run on one screen. Rows are the model's modules at one depth
//! (by default its repeated blocks, the layers), in execution order, in three bands (forward,
//! backward, the update); columns are the steps × ranks (or × micro-batches). A cell is the
//! module's output error against its tolerance, with what the diagnosis found there: a source
//! inside the module, or an error received from a peer rank through a communication op.
//!
//! The map is built from the judgements [`crate::diagnose()`] makes anyway, one step at a time
//! ([`crate::diagnose::diagnose_visiting`]): the same rules, the same tolerances, the same
//! sources, and no more than one step's rows in memory. The rules of the depth and of the
//! columns are in `docs/diagnosis.md` ("The divergence map").

use foldhash::{HashMap, HashSet};
use serde::{Serialize, Serializer};

use crate::diagnose::{diagnose_visiting, Diagnosis, RankJudgements, StepVisitor};
use crate::error::DiagnoseError;
use crate::group::module_path;
use crate::load::{CompareFile, Direction, Mode, Node, SideGraph};
use crate::options::Options;
use crate::site::without_call_index;

/// Columns shown when nothing else is asked: beyond, ranks aggregate to the worst.
pub const DEFAULT_MAX_COLUMNS: usize = 256;

/// What the columns of a step are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnAxis {
    /// One column per rank; a module's micro-batches aggregate to the worst.
    Ranks,
    /// One column per rank and micro-batch.
    MicroBatches,
}

/// Which map to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MapOptions {
    /// The rows' depth in the module hierarchy (1: the top-level modules); `None`: the depth of
    /// the repeated blocks ([`DepthRule::RepeatedBlocks`]).
    pub depth: Option<u32>,
    pub columns: ColumnAxis,
    /// At most about this many columns: a step's columns beyond its share
    /// (`max_columns / steps`, at least one) aggregate contiguous ranks to the worst.
    pub max_columns: usize,
}

impl Default for MapOptions {
    fn default() -> Self {
        MapOptions {
            depth: None,
            columns: ColumnAxis::Ranks,
            max_columns: DEFAULT_MAX_COLUMNS,
        }
    }
}

/// How the rows' depth was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DepthRule {
    /// Asked for ([`MapOptions::depth`]).
    Chosen,
    /// The shallowest depth where sibling modules repeat: one class, names that differ only
    /// in a numeric index (`layers.0.Block`, `layers.1.Block`, …).
    RepeatedBlocks,
    /// No module repeats: the top-level modules.
    TopLevel,
}

/// The whole map.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DivergenceMap {
    pub mode: Mode,
    /// The rows' depth (1: the top-level modules), and how it was chosen.
    pub depth: u32,
    pub depth_rule: DepthRule,
    pub axis: ColumnAxis,
    /// The steps and ranks judged.
    pub steps: Vec<i64>,
    pub ranks: Vec<i64>,
    pub columns: Vec<Column>,
    /// Forward, backward, update (those that have rows).
    pub bands: Vec<Band>,
    /// The cell of the diagnosis's first source (the head of its ranked list), if any.
    pub first_source: Option<CellAt>,
}

/// One column: a step and a run of ranks (one rank unless aggregated), with its micro-batches
/// under [`ColumnAxis::MicroBatches`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Column {
    pub step: i64,
    pub rank_first: i64,
    pub rank_last: i64,
    /// Under [`ColumnAxis::MicroBatches`]: the micro-batch of the first and the last rank.
    pub micro_first: Option<i64>,
    pub micro_last: Option<i64>,
    /// How many columns of full resolution it holds (1: not aggregated).
    pub width: usize,
}

/// The rows of one pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Band {
    pub direction: Direction,
    pub rows: Vec<Row>,
}

/// One module (without its call index: every micro-batch's copy is the same row).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// `Module.layers.2.Block.forward`.
    pub module: String,
    /// As people write it: `layers.2`.
    pub label: String,
    /// Its depth in the hierarchy (1: top level).
    pub depth: u32,
    /// One per column; `None` where no rank of the column holds the module.
    pub cells: Vec<Option<Cell>>,
}

/// One module in one column (the worst rank and micro-batch of it, when it holds several).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    /// `err / tolerance`: at 1 the output is at its jump tolerance. `None`: the module is not
    /// matched or has no output that compares.
    #[serde(serialize_with = "number_or_text")]
    pub ratio: Option<f64>,
    /// The output's relative error (docs/diagnosis.md §1) and its jump tolerance.
    #[serde(serialize_with = "number_or_text")]
    pub err: Option<f64>,
    #[serde(serialize_with = "number_or_text")]
    pub tolerance: Option<f64>,
    /// Where a click goes: the step, rank, micro-batch and node of the worst copy.
    pub step: i64,
    pub rank: i64,
    pub micro_step: i64,
    pub node: String,
    /// Sources inside the module (itself or what it calls), over every rank and micro-batch the
    /// cell holds.
    pub sources: u32,
    /// The first of them (execution order, lowest rank), and its rank.
    pub source: Option<String>,
    pub source_rank: Option<i64>,
    /// The error came from this peer rank through a communication op inside the module.
    pub from_rank: Option<i64>,
}

/// A cell by position, with the node it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CellAt {
    pub band: usize,
    pub row: usize,
    pub column: usize,
    pub step: i64,
    pub rank: i64,
    pub node: String,
}

/// A non-finite number as JSON's text for it (`"Infinity"`, `"NaN"`), not serde's `null`.
fn number_or_text<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match *v {
        None => s.serialize_none(),
        Some(x) if x.is_finite() => s.serialize_f64(x),
        Some(x) if x.is_nan() => s.serialize_str("NaN"),
        Some(x) if x > 0.0 => s.serialize_str("Infinity"),
        Some(_) => s.serialize_str("-Infinity"),
    }
}

/// `err / tolerance`; an error against a zero tolerance (integers) is infinite unless zero.
fn ratio(err: f64, tolerance: f64) -> f64 {
    if err == 0.0 {
        0.0
    } else if tolerance > 0.0 {
        err / tolerance
    } else {
        f64::INFINITY
    }
}

impl Cell {
    /// How bad, for "the worst": not compared below any number.
    fn badness(&self) -> f64 {
        self.ratio
            .map_or(-1.0, |r| if r.is_nan() { f64::INFINITY } else { r })
    }

    /// Joins `other` (a later rank or micro-batch) into this cell: the worst stands for both,
    /// the sources add up and the first stays first.
    fn merge(&mut self, other: Cell) {
        let sources = self.sources + other.sources;
        let first = if self.source.is_some() {
            (self.source.take(), self.source_rank)
        } else {
            (other.source.clone(), other.source_rank)
        };
        if other.badness() > self.badness() {
            *self = other;
        }
        self.sources = sources;
        (self.source, self.source_rank) = first;
    }
}

fn is_module(n: &Node) -> bool {
    n.node_type == 0 && !n.param_grad
}

/// Each node's depth in the hierarchy (the root 0, its children 1).
fn depths(g: &SideGraph, order: &[u32]) -> Vec<u32> {
    let mut depth = vec![1u32; g.nodes.len()];
    // Execution order is a post-order walk: reversed, a parent comes before its children.
    for &i in order.iter().rev() {
        depth[i as usize] = match g.nodes[i as usize].parent {
            Some(p) => depth[p as usize].saturating_add(1),
            None if g.root == Some(i) => 0,
            None => 1,
        };
    }
    depth
}

/// A module's name with its path's last numeric index replaced (`Module.layers.#.Block.forward`):
/// the blocks of one repeated list share it.
fn block_pattern(module: &str) -> Option<String> {
    let mut parts: Vec<&str> = module.split('.').collect();
    let k = parts
        .iter()
        .rposition(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))?;
    parts[k] = "#";
    Some(parts.join("."))
}

/// The depth of the repeated blocks: the shallowest where two or more forward modules share one
/// [`block_pattern`] (one class, names differing only in an index).
fn repeated_block_depth(ranks: &[RankJudgements<'_>]) -> Option<u32> {
    let mut seen: HashMap<(u32, String), HashSet<&str>> = HashMap::default();
    for r in ranks {
        let g = &r.data.npu;
        let depth = depths(g, &r.order);
        for (i, n) in g.nodes.iter().enumerate() {
            if !is_module(n) || n.direction != Direction::Forward || depth[i] == 0 {
                continue;
            }
            let module = without_call_index(&n.name);
            if let Some(p) = block_pattern(module) {
                seen.entry((depth[i], p)).or_default().insert(module);
            }
        }
    }
    seen.iter()
        .filter(|(_, members)| members.len() >= 2)
        .map(|((d, _), _)| *d)
        .min()
}

/// The rows of one rank's graph at `depth`: the modules at that depth, the modules above it
/// that call no module (so that every leaf of the model at or above the depth is covered
/// once), and the top-level nodes of the update.
struct RankRows {
    is_row: Vec<bool>,
    depth: Vec<u32>,
}

impl RankRows {
    fn new(g: &SideGraph, order: &[u32], at: u32) -> RankRows {
        let depth = depths(g, order);
        let calls_module: Vec<bool> = g
            .nodes
            .iter()
            .map(|n| n.children.iter().any(|&c| is_module(&g.nodes[c as usize])))
            .collect();
        let is_row = g
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let d = depth[i];
                d >= 1
                    && ((is_module(n) && (d == at || (d < at && !calls_module[i])))
                        || (n.direction == Direction::Update && d == 1 && !n.param_grad))
            })
            .collect();
        RankRows { is_row, depth }
    }

    /// The row node holding node `i` (itself or an ancestor).
    fn row_of(&self, g: &SideGraph, i: u32) -> Option<u32> {
        std::iter::once(i)
            .chain(g.ancestors(i))
            .find(|&a| self.is_row[a as usize])
    }
}

/// A column of full resolution within a step: the rank's position, and the micro-batch.
type FullColumn = (usize, i64);

/// Builds the map step by step.
#[derive(Clone)]
struct Builder {
    opts: MapOptions,
    /// Columns a step may take before its ranks aggregate.
    budget: usize,
    depth: Option<(u32, DepthRule)>,
    /// Rows: (pass, module) → id; per id its key and depth.
    row_ids: HashMap<(Direction, String), usize>,
    rows: Vec<(Direction, String, u32)>,
    /// Per pass, the row ids in execution order.
    order: HashMap<Direction, Vec<usize>>,
    columns: Vec<Column>,
    cells: HashMap<(usize, usize), Cell>,
    steps: Vec<i64>,
    ranks: Vec<i64>,
    /// The first source: its row and column.
    first_source: Option<(usize, usize, i64, i64, String)>,
}

impl Builder {
    fn new(opts: MapOptions, steps: usize) -> Builder {
        Builder {
            opts,
            budget: (opts.max_columns / steps.max(1)).max(1),
            depth: opts.depth.map(|d| (d.max(1), DepthRule::Chosen)),
            row_ids: HashMap::default(),
            rows: Vec::new(),
            order: HashMap::default(),
            columns: Vec::new(),
            cells: HashMap::default(),
            steps: Vec::new(),
            ranks: Vec::new(),
            first_source: None,
        }
    }

    fn row_id(&mut self, direction: Direction, module: &str, depth: u32) -> usize {
        let next = self.rows.len();
        let id = *self
            .row_ids
            .entry((direction, module.to_owned()))
            .or_insert(next);
        if id == next {
            self.rows.push((direction, module.to_owned(), depth));
        }
        id
    }

    /// Places the rows of one rank's pass (`seq`, execution order) among those already known:
    /// a new row after the known row it follows, before the first known row when none precedes
    /// it, at the end when the rank shares no row with the others (a later pipeline stage).
    fn place(&mut self, direction: Direction, seq: &[usize]) {
        let order = self.order.entry(direction).or_default();
        let mut pos: HashMap<usize, usize> =
            order.iter().enumerate().map(|(p, &id)| (id, p)).collect();
        let mut last: Option<usize> = None;
        let mut pending: Vec<usize> = Vec::new();
        for &id in seq {
            match pos.get(&id) {
                Some(&p) => {
                    if !pending.is_empty() {
                        let at = last.map_or(p, |l| l + 1);
                        order.splice(at..at, pending.drain(..));
                        pos = order.iter().enumerate().map(|(p, &id)| (id, p)).collect();
                    }
                    last = pos.get(&id).copied();
                }
                None if !pending.contains(&id) => pending.push(id),
                None => {}
            }
        }
        if !pending.is_empty() {
            let at = last.map_or(order.len(), |l| l + 1);
            order.splice(at..at, pending);
        }
    }

    /// One judged step: every rank's rows, their cells, the step's columns.
    fn step(&mut self, ranks: &[RankJudgements<'_>], d: &Diagnosis) {
        let Some(step) = ranks.first().map(|r| r.data.step) else {
            return;
        };
        self.steps.push(step);
        for r in ranks {
            if !self.ranks.contains(&r.data.rank) {
                self.ranks.push(r.data.rank);
            }
        }
        let (at, _) = *self.depth.get_or_insert_with(|| {
            repeated_block_depth(ranks)
                .map_or((1, DepthRule::TopLevel), |d| (d, DepthRule::RepeatedBlocks))
        });
        let mut full: HashMap<(usize, FullColumn), Cell> = HashMap::default();
        // The step's first source (the head of its ranked list): its rank and row node, then
        // its row and full column.
        let head = d.sources.first();
        let mut head_row: Option<(usize, u32)> = None;
        let mut first: Option<(usize, FullColumn)> = None;
        for (rank_pos, r) in ranks.iter().enumerate() {
            let g = &r.data.npu;
            let rank = r.data.rank;
            let rows = RankRows::new(g, &r.order, at);
            // Sources and peers of this rank, at the row that holds them.
            let mut sources: HashMap<u32, (u32, String)> = HashMap::default();
            for s in d.sources.iter().filter(|s| s.rank == rank) {
                let Some(row) = g.find(&s.node).and_then(|i| rows.row_of(g, i)) else {
                    continue;
                };
                let e = sources.entry(row).or_insert((0, s.node.clone()));
                e.0 += 1;
                if head.is_some_and(|h| std::ptr::eq(h, s)) {
                    head_row = Some((rank_pos, row));
                }
            }
            let mut peers: HashMap<u32, i64> = HashMap::default();
            for p in d.peer_inheritance.iter().filter(|p| p.rank == rank) {
                if let Some(row) = g.find(&p.node).and_then(|i| rows.row_of(g, i)) {
                    peers.entry(row).or_insert(p.from_rank);
                }
            }
            let mut seq: HashMap<Direction, Vec<usize>> = HashMap::default();
            for &i in &r.order {
                if !rows.is_row[i as usize] {
                    continue;
                }
                let n = &g.nodes[i as usize];
                let module = without_call_index(&n.name);
                let id = self.row_id(n.direction, module, rows.depth[i as usize]);
                let s = seq.entry(n.direction).or_default();
                if !s.contains(&id) {
                    s.push(id);
                }
                let judgement = r.judgement(i);
                let output = judgement.as_ref().and_then(|j| j.output.as_ref());
                let found = sources.get(&i);
                let micro = match self.opts.columns {
                    ColumnAxis::Ranks => 0,
                    ColumnAxis::MicroBatches => n.micro_step,
                };
                let cell = Cell {
                    ratio: output.map(|l| ratio(l.err, l.tolerance.jump)),
                    err: output.map(|l| l.err),
                    tolerance: output.map(|l| l.tolerance.jump),
                    step,
                    rank,
                    micro_step: n.micro_step,
                    node: n.name.to_string(),
                    sources: found.map_or(0, |f| f.0),
                    source: found.map(|f| f.1.clone()),
                    source_rank: found.map(|_| rank),
                    from_rank: peers.get(&i).copied(),
                };
                if head_row == Some((rank_pos, i)) {
                    first = Some((id, (rank_pos, micro)));
                }
                match full.entry((id, (rank_pos, micro))) {
                    std::collections::hash_map::Entry::Occupied(mut o) => o.get_mut().merge(cell),
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(cell);
                    }
                }
            }
            for (direction, s) in seq {
                self.place(direction, &s);
            }
        }
        // The step's columns, aggregated to its share.
        let mut keys: Vec<FullColumn> = full.keys().map(|&(_, c)| c).collect();
        keys.sort_unstable();
        keys.dedup();
        if keys.is_empty() {
            keys.push((0, 0));
        }
        let per = keys.len().div_ceil(self.budget);
        let base = self.columns.len();
        let mut column_of: HashMap<FullColumn, usize> = HashMap::default();
        for (k, chunk) in keys.chunks(per).enumerate() {
            let (a, b) = (chunk[0], chunk[chunk.len() - 1]);
            let micro = self.opts.columns == ColumnAxis::MicroBatches;
            self.columns.push(Column {
                step,
                rank_first: ranks.get(a.0).map_or(0, |r| r.data.rank),
                rank_last: ranks.get(b.0).map_or(0, |r| r.data.rank),
                micro_first: micro.then_some(a.1),
                micro_last: micro.then_some(b.1),
                width: chunk.len(),
            });
            for &c in chunk {
                column_of.insert(c, base + k);
            }
        }
        let mut full: Vec<((usize, FullColumn), Cell)> = full.into_iter().collect();
        full.sort_unstable_by_key(|(k, _)| *k);
        for ((id, c), cell) in full {
            let column = column_of[&c];
            match self.cells.entry((id, column)) {
                std::collections::hash_map::Entry::Occupied(mut o) => o.get_mut().merge(cell),
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(cell);
                }
            }
        }
        if self.first_source.is_none() {
            if let (Some((id, c)), Some(h)) = (first, head) {
                self.first_source = Some((id, column_of[&c], step, h.rank, h.node.clone()));
            }
        }
    }

    fn finish(mut self, mode: Mode) -> DivergenceMap {
        let (depth, depth_rule) = self.depth.unwrap_or((1, DepthRule::TopLevel));
        let mut at: HashMap<usize, (usize, usize)> = HashMap::default();
        let mut bands = Vec::new();
        for direction in [Direction::Forward, Direction::Backward, Direction::Update] {
            let Some(ids) = self.order.remove(&direction) else {
                continue;
            };
            let band = bands.len();
            let rows = ids
                .iter()
                .enumerate()
                .map(|(k, &id)| {
                    at.insert(id, (band, k));
                    let (_, module, depth) = &self.rows[id];
                    Row {
                        label: module_path(module).to_owned(),
                        module: module.clone(),
                        depth: *depth,
                        cells: (0..self.columns.len())
                            .map(|c| self.cells.remove(&(id, c)))
                            .collect(),
                    }
                })
                .collect();
            bands.push(Band { direction, rows });
        }
        let first_source = self
            .first_source
            .and_then(|(id, column, step, rank, node)| {
                let &(band, row) = at.get(&id)?;
                Some(CellAt {
                    band,
                    row,
                    column,
                    step,
                    rank,
                    node,
                })
            });
        DivergenceMap {
            mode,
            depth,
            depth_rule,
            axis: self.opts.columns,
            steps: self.steps,
            ranks: self.ranks,
            columns: self.columns,
            bands,
            first_source,
        }
    }
}

/// Diagnoses `file` (as [`crate::diagnose()`] with `opts`) and builds its divergence map from the
/// same judgements.
pub fn divergence_map(
    file: &CompareFile,
    opts: &Options,
    map: &MapOptions,
) -> Result<(Diagnosis, DivergenceMap), DiagnoseError> {
    divergence_map_with_progress(file, opts, map, false, &mut |_| {})
}

/// How far a map's computation is (the map is computed from every graph of the file, read one
/// step at a time).
#[derive(Debug, Clone, Copy)]
pub struct MapProgress<'a> {
    /// Graphs (a step and rank) read, of the total to read.
    pub graphs_read: usize,
    pub graphs_total: usize,
    /// After each judged step, when asked for: the map of the steps judged so far (the columns
    /// of the later steps not there yet).
    pub partial: Option<&'a DivergenceMap>,
}

/// [`divergence_map`], telling `progress` each graph read and (with `partial`) handing it the
/// map of the steps judged so far after each step.
pub fn divergence_map_with_progress(
    file: &CompareFile,
    opts: &Options,
    map: &MapOptions,
    partial: bool,
    progress: &mut dyn FnMut(MapProgress<'_>),
) -> Result<(Diagnosis, DivergenceMap), DiagnoseError> {
    struct Visitor<'p> {
        builder: Builder,
        mode: Mode,
        partial: bool,
        read: (usize, usize),
        progress: &'p mut dyn FnMut(MapProgress<'_>),
    }
    impl StepVisitor for Visitor<'_> {
        fn graph_read(&mut self, read: usize, total: usize) {
            self.read = (read, total);
            (self.progress)(MapProgress {
                graphs_read: read,
                graphs_total: total,
                partial: None,
            });
        }
        fn step(&mut self, ranks: &[RankJudgements<'_>], d: &Diagnosis) {
            self.builder.step(ranks, d);
            if self.partial {
                let so_far = self.builder.clone().finish(self.mode);
                (self.progress)(MapProgress {
                    graphs_read: self.read.0,
                    graphs_total: self.read.1,
                    partial: Some(&so_far),
                });
            }
        }
    }
    let steps = match opts.step {
        Some(_) => 1,
        None => file.steps().len(),
    };
    let mut visitor = Visitor {
        builder: Builder::new(*map, steps),
        mode: file.mode(),
        partial,
        read: (0, 0),
        progress,
    };
    let d = diagnose_visiting(file, opts, &mut visitor)?;
    Ok((d, visitor.builder.finish(file.mode())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_share_a_pattern_without_their_index() {
        assert_eq!(
            block_pattern("Module.layers.12.Block.forward").as_deref(),
            Some("Module.layers.#.Block.forward")
        );
        assert_eq!(
            block_pattern("Module.layers.1.mlp.experts.3.Linear.forward").as_deref(),
            Some("Module.layers.1.mlp.experts.#.Linear.forward")
        );
        assert_eq!(block_pattern("Module.head.Linear.forward"), None);
    }

    #[test]
    fn the_worst_stands_for_a_merged_cell_and_sources_add_up() {
        let cell = |ratio: Option<f64>, rank: i64, sources: u32| Cell {
            ratio,
            err: ratio,
            tolerance: Some(1.0),
            step: 0,
            rank,
            micro_step: 0,
            node: format!("n{rank}"),
            sources,
            source: (sources > 0).then(|| format!("s{rank}")),
            source_rank: (sources > 0).then_some(rank),
            from_rank: None,
        };
        let mut a = cell(Some(0.5), 0, 1);
        a.merge(cell(Some(3.0), 1, 0));
        a.merge(cell(None, 2, 2));
        a.merge(cell(Some(f64::INFINITY), 3, 0));
        assert_eq!((a.rank, a.sources), (3, 3));
        assert_eq!((a.source.as_deref(), a.source_rank), (Some("s0"), Some(0)));
    }

    #[test]
    fn a_ratio_against_a_zero_tolerance_is_infinite_unless_equal() {
        assert_eq!(ratio(0.0, 0.0), 0.0);
        assert_eq!(ratio(1e-9, 0.0), f64::INFINITY);
        assert_eq!(ratio(0.02, 0.01), 2.0);
    }
}
