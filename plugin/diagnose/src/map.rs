//! The divergence map: the whole run on one screen. Rows are the model's modules at one depth
//! (by default its repeated blocks, the layers), in execution order, in three bands (forward,
//! backward, the update); columns are the steps × ranks (or × micro-batches). A cell is the
//! module's output error against its tolerance, with what the diagnosis found there: a source
//! inside the module, or an error received from a peer rank through a communication op.
//!
//! The map is built from the judgements [`crate::diagnose()`] makes anyway, one step at a time
//! ([`crate::diagnose::diagnose_visiting`]): the same rules, the same tolerances, the same
//! sources, and no more than one step's rows in memory. It is made once at full resolution
//! ([`FineMap`]: one column per rank, or rank and micro-batch, of every step) and aggregated to
//! any number of columns from there ([`FineMap::aggregate`]). The rules of the depth and of the
//! columns are in `docs/diagnosis.md` ("The divergence map").

use foldhash::{HashMap, HashSet};
use serde::{Serialize, Serializer};

use crate::diagnose::{diagnose_visiting, Diagnosis, RankJudgements, StepVisitor};
use crate::error::DiagnoseError;
use crate::group::module_path;
use crate::judge::{Judge, Judgement};
use crate::load::{CompareFile, Direction, Mode, Node, RankData, SideGraph};
use crate::options::Options;
use crate::site::without_call_index;
use crate::source::Source;

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
fn repeated_block_depth<'g>(
    graphs: impl Iterator<Item = (&'g SideGraph, &'g [u32])>,
) -> Option<u32> {
    let mut seen: HashMap<(u32, String), HashSet<&str>> = HashMap::default();
    for (g, order) in graphs {
        let depth = depths(g, order);
        for (i, n) in g.iter().enumerate() {
            if !is_module(&n) || n.direction != Direction::Forward || depth[i] == 0 {
                continue;
            }
            let module = without_call_index(n.name());
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

/// Which rows and which columns of full resolution a map has: every [`MapOptions`] of one shape
/// is one [`FineMap`], aggregated to its number of columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MapShape {
    /// As [`MapOptions::depth`].
    pub depth: Option<u32>,
    pub columns: ColumnAxis,
}

impl MapOptions {
    /// The shape of the map these options ask for.
    pub fn shape(&self) -> MapShape {
        MapShape {
            depth: self.depth,
            columns: self.columns,
        }
    }
}

/// One module in one column of full resolution (a rank, or a rank's micro-batch), compactly: the
/// worst of its copies there (its micro-batches under [`ColumnAxis::Ranks`]), the names being
/// indexes into the step's [`FineStep::names`].
#[derive(Debug, Clone, Copy, PartialEq)]
struct FineCell {
    /// The output's relative error and its jump tolerance.
    output: Option<(f64, f64)>,
    micro_step: i64,
    node: u32,
    sources: u32,
    /// The first source inside.
    source: Option<u32>,
    from_rank: Option<i64>,
}

impl FineCell {
    fn ratio(&self) -> Option<f64> {
        self.output.map(|(err, tolerance)| ratio(err, tolerance))
    }

    /// How bad, for "the worst": not compared below any number.
    fn badness(&self) -> f64 {
        self.ratio()
            .map_or(-1.0, |r| if r.is_nan() { f64::INFINITY } else { r })
    }
}

/// Cells joined into one (a module's copies in one column, or the columns of an aggregated one):
/// the worst stands for them all, the sources add up and the first stays first.
#[derive(Debug, Clone, Copy)]
struct Joined {
    worst: FineCell,
    /// The rank of the worst.
    rank: i64,
    sources: u32,
    /// The first source and its rank.
    first: Option<(u32, i64)>,
}

impl Joined {
    fn new(cell: FineCell, rank: i64) -> Joined {
        Joined {
            worst: cell,
            rank,
            sources: cell.sources,
            first: cell.source.map(|s| (s, rank)),
        }
    }

    /// Joins `cell` of `rank` (a later micro-batch, or a later column).
    fn join(&mut self, cell: FineCell, rank: i64) {
        self.sources = self.sources.saturating_add(cell.sources);
        if self.first.is_none() {
            self.first = cell.source.map(|s| (s, rank));
        }
        if cell.badness() > self.worst.badness() {
            self.worst = cell;
            self.rank = rank;
        }
    }

    /// As a cell of full resolution (the copies of one column: one rank).
    fn fine(self) -> FineCell {
        FineCell {
            sources: self.sources,
            source: self.first.map(|(s, _)| s),
            ..self.worst
        }
    }

    fn cell(self, step: i64, names: &[Box<str>]) -> Cell {
        let name = |i: u32| {
            names
                .get(i as usize)
                .map(|n| n.to_string())
                .unwrap_or_default()
        };
        let w = self.worst;
        Cell {
            ratio: w.ratio(),
            err: w.output.map(|(err, _)| err),
            tolerance: w.output.map(|(_, tolerance)| tolerance),
            step,
            rank: self.rank,
            micro_step: w.micro_step,
            node: name(w.node),
            sources: self.sources,
            source: self.first.map(|(s, _)| name(s)),
            source_rank: self.first.map(|(_, rank)| rank),
            from_rank: w.from_rank,
        }
    }
}

/// The node names of one step, each once.
#[derive(Default, Clone)]
struct Names {
    ids: HashMap<Box<str>, u32>,
    names: Vec<Box<str>>,
}

impl Names {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.ids.insert(name.into(), id);
        self.names.push(name.into());
        id
    }
}

/// What marks a step's cells: its diagnosis (sources and peer inheritance) and the head of its
/// ranked list.
struct Marks<'d> {
    diagnosis: &'d Diagnosis,
    head: Option<&'d Source>,
}

/// The cells of one step under construction, rank by rank ([`FineMap::add_rank`]).
#[derive(Default, Clone)]
struct StepCells {
    names: Names,
    /// Per row id and column of full resolution, its copies joined.
    full: HashMap<(usize, FullColumn), Joined>,
    /// The rank at each position added.
    rank_at: HashMap<usize, i64>,
    /// The row id and column of the step's first source.
    first: Option<(usize, FullColumn)>,
}

impl StepCells {
    /// The step of these cells, for a map of `rows` row ids; `first`: the rank and node of the
    /// step's first source.
    fn finish(self, step: i64, rows: usize, first: Option<(i64, String)>) -> FineStep {
        let mut keys: Vec<FullColumn> = self.full.keys().map(|&(_, c)| c).collect();
        keys.sort_unstable();
        keys.dedup();
        if keys.is_empty() {
            keys.push((0, 0));
        }
        let column_of: HashMap<FullColumn, usize> =
            keys.iter().enumerate().map(|(k, &c)| (c, k)).collect();
        let mut cells: Vec<Vec<Option<FineCell>>> = vec![Vec::new(); rows];
        for ((id, c), joined) in self.full {
            if let (Some(row), Some(&column)) = (cells.get_mut(id), column_of.get(&c)) {
                if row.is_empty() {
                    *row = vec![None; keys.len()];
                }
                row[column] = Some(joined.fine());
            }
        }
        let first = match (self.first, first) {
            (Some((id, c)), Some((rank, node))) => {
                column_of.get(&c).map(|&column| (id, column, rank, node))
            }
            _ => None,
        };
        FineStep {
            step,
            columns: keys
                .iter()
                .map(|&(p, micro)| (self.rank_at.get(&p).copied().unwrap_or(0), micro))
                .collect(),
            cells,
            names: self.names.names,
            first,
        }
    }
}

/// One judged step of a [`FineMap`].
#[derive(Debug)]
struct FineStep {
    step: i64,
    /// Its columns of full resolution in order: each one's rank and micro-batch.
    columns: Vec<(i64, i64)>,
    /// Per row id known by then: its cell in each column (`None` where the rank does not hold
    /// it); empty when no column holds it.
    cells: Vec<Vec<Option<FineCell>>>,
    names: Vec<Box<str>>,
    /// The cell of the step's first source (the head of its ranked list): its row id, column,
    /// rank and node.
    first: Option<(usize, usize, i64, String)>,
}

/// The map at full resolution, one column per rank (or per rank and micro-batch) of every step,
/// made once from the judgements; [`FineMap::aggregate`] makes the map of any number of columns
/// from it without reading a graph again. Cloning it is cheap (the steps are shared).
#[derive(Debug, Clone)]
pub struct FineMap {
    mode: Mode,
    shape: MapShape,
    /// The steps the columns are shared among (those to judge).
    steps_planned: usize,
    depth: Option<(u32, DepthRule)>,
    /// Rows: (pass, module) → id; per id its key and depth.
    row_ids: HashMap<(Direction, String), usize>,
    rows: Vec<(Direction, String, u32)>,
    /// Per pass, the row ids in execution order.
    order: HashMap<Direction, Vec<usize>>,
    ranks: Vec<i64>,
    steps: Vec<std::sync::Arc<FineStep>>,
}

impl FineMap {
    fn new(mode: Mode, shape: MapShape, steps_planned: usize) -> FineMap {
        FineMap {
            mode,
            shape,
            steps_planned,
            depth: shape.depth.map(|d| (d.max(1), DepthRule::Chosen)),
            row_ids: HashMap::default(),
            rows: Vec::new(),
            order: HashMap::default(),
            ranks: Vec::new(),
            steps: Vec::new(),
        }
    }

    /// About how many bytes it holds.
    pub fn weight(&self) -> usize {
        let rows: usize = self.rows.iter().map(|(_, m, _)| 2 * m.len() + 64).sum();
        let steps: usize = self
            .steps
            .iter()
            .map(|s| {
                s.cells
                    .iter()
                    .map(|c| 24 + c.len() * std::mem::size_of::<Option<FineCell>>())
                    .sum::<usize>()
                    + s.names.iter().map(|n| n.len() + 16).sum::<usize>()
                    + s.columns.len() * 16
            })
            .sum();
        rows + steps
    }

    /// The steps judged so far.
    pub fn steps(&self) -> impl Iterator<Item = i64> + '_ {
        self.steps.iter().map(|s| s.step)
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
    fn add_step(&mut self, ranks: &[RankJudgements<'_>], d: &Diagnosis) {
        let Some(step) = ranks.first().map(|r| r.data.step) else {
            return;
        };
        for r in ranks {
            if !self.ranks.contains(&r.data.rank) {
                self.ranks.push(r.data.rank);
            }
        }
        self.decide_depth(ranks.iter().map(|r| (&r.data.npu, r.order.as_slice())));
        let mut cells = StepCells::default();
        let marks = Marks {
            diagnosis: d,
            head: d.sources.first(),
        };
        for (rank_pos, r) in ranks.iter().enumerate() {
            self.add_rank(
                &mut cells,
                rank_pos,
                r.data,
                &r.order,
                &|i| r.judgement(i),
                Some(&marks),
            );
        }
        let first = marks.head.map(|h| (h.rank, h.node.clone()));
        self.steps.push(std::sync::Arc::new(cells.finish(
            step,
            self.rows.len(),
            first,
        )));
    }

    /// The depth of the rows, decided on the first graphs seen unless already known.
    fn decide_depth<'g>(&mut self, graphs: impl Iterator<Item = (&'g SideGraph, &'g [u32])>) {
        if self.depth.is_none() {
            self.depth = Some(
                repeated_block_depth(graphs)
                    .map_or((1, DepthRule::TopLevel), |d| (d, DepthRule::RepeatedBlocks)),
            );
        }
    }

    /// The cells of one rank's graph (at `rank_pos` among the step's ranks) added to `cells`:
    /// each row node's output as `judgement` judges it, with the step's sources and peers
    /// (`marks`) at the rows that hold them.
    fn add_rank<'a>(
        &mut self,
        cells: &mut StepCells,
        rank_pos: usize,
        data: &RankData,
        order: &[u32],
        judgement: &dyn Fn(u32) -> Option<Judgement<'a>>,
        marks: Option<&Marks<'_>>,
    ) {
        let (at, _) = self.depth.unwrap_or((1, DepthRule::TopLevel));
        let g = &data.npu;
        let rank = data.rank;
        cells.rank_at.insert(rank_pos, rank);
        let rows = RankRows::new(g, order, at);
        // Sources and peers of this rank, at the row that holds them.
        let mut sources: HashMap<u32, (u32, u32)> = HashMap::default();
        let mut peers: HashMap<u32, i64> = HashMap::default();
        let mut head_row: Option<u32> = None;
        if let Some(m) = marks {
            for s in m.diagnosis.sources.iter().filter(|s| s.rank == rank) {
                let Some(row) = g.find(&s.node).and_then(|i| rows.row_of(g, i)) else {
                    continue;
                };
                let name = cells.names.id(&s.node);
                let e = sources.entry(row).or_insert((0, name));
                e.0 += 1;
                if m.head.is_some_and(|h| std::ptr::eq(h, s)) {
                    head_row = Some(row);
                }
            }
            for p in m
                .diagnosis
                .peer_inheritance
                .iter()
                .filter(|p| p.rank == rank)
            {
                if let Some(row) = g.find(&p.node).and_then(|i| rows.row_of(g, i)) {
                    peers.entry(row).or_insert(p.from_rank);
                }
            }
        }
        let mut seq: HashMap<Direction, Vec<usize>> = HashMap::default();
        for &i in order {
            if !rows.is_row[i as usize] {
                continue;
            }
            let n = g.node(i);
            let module = without_call_index(n.name());
            let id = self.row_id(n.direction, module, rows.depth[i as usize]);
            let s = seq.entry(n.direction).or_default();
            if !s.contains(&id) {
                s.push(id);
            }
            let judged = judgement(i);
            let output = judged.as_ref().and_then(|j| j.output.as_ref());
            let found = sources.get(&i);
            let micro = match self.shape.columns {
                ColumnAxis::Ranks => 0,
                ColumnAxis::MicroBatches => n.micro_step,
            };
            let cell = FineCell {
                output: output.map(|l| (l.err, l.tolerance.jump)),
                micro_step: n.micro_step,
                node: cells.names.id(n.name()),
                sources: found.map_or(0, |f| f.0),
                source: found.map(|f| f.1),
                from_rank: peers.get(&i).copied(),
            };
            if head_row == Some(i) {
                cells.first = Some((id, (rank_pos, micro)));
            }
            match cells.full.entry((id, (rank_pos, micro))) {
                std::collections::hash_map::Entry::Occupied(mut o) => o.get_mut().join(cell, rank),
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(Joined::new(cell, rank));
                }
            }
        }
        for (direction, s) in seq {
            self.place(direction, &s);
        }
    }

    /// The map of at most about `max_columns` columns: a step's columns beyond its share
    /// (`max_columns / steps`, at least one) aggregate contiguous ranks to the worst, and the
    /// sources of the columns joined add up (the first stays first).
    pub fn aggregate(&self, max_columns: usize) -> DivergenceMap {
        let budget = (max_columns / self.steps_planned.max(1)).max(1);
        let micro = self.shape.columns == ColumnAxis::MicroBatches;
        let mut columns: Vec<Column> = Vec::new();
        // Per row id, its cells so far.
        let mut cells: Vec<Vec<Option<Cell>>> = vec![Vec::new(); self.rows.len()];
        let mut first_source = None;
        for s in &self.steps {
            let per = s.columns.len().div_ceil(budget).max(1);
            let base = columns.len();
            for chunk in s.columns.chunks(per) {
                let (a, b) = (chunk[0], chunk[chunk.len() - 1]);
                columns.push(Column {
                    step: s.step,
                    rank_first: a.0,
                    rank_last: b.0,
                    micro_first: micro.then_some(a.1),
                    micro_last: micro.then_some(b.1),
                    width: chunk.len(),
                });
            }
            for (row, out) in s.cells.iter().zip(cells.iter_mut()) {
                out.resize(base, None);
                for (chunk, ranks) in row.chunks(per).zip(s.columns.chunks(per)) {
                    let mut joined: Option<Joined> = None;
                    for (cell, &(rank, _)) in chunk.iter().zip(ranks) {
                        let Some(cell) = *cell else {
                            continue;
                        };
                        match &mut joined {
                            Some(j) => j.join(cell, rank),
                            None => joined = Some(Joined::new(cell, rank)),
                        }
                    }
                    out.push(joined.map(|j| j.cell(s.step, &s.names)));
                }
            }
            if first_source.is_none() {
                first_source = s.first.as_ref().map(|(id, column, rank, node)| {
                    (*id, base + column / per, s.step, *rank, node.clone())
                });
            }
        }
        let mut at: HashMap<usize, (usize, usize)> = HashMap::default();
        let mut bands = Vec::new();
        for direction in [Direction::Forward, Direction::Backward, Direction::Update] {
            let Some(ids) = self.order.get(&direction) else {
                continue;
            };
            let band = bands.len();
            let rows = ids
                .iter()
                .enumerate()
                .map(|(k, &id)| {
                    at.insert(id, (band, k));
                    let (_, module, depth) = &self.rows[id];
                    let mut row_cells = cells.get_mut(id).map(std::mem::take).unwrap_or_default();
                    row_cells.resize(columns.len(), None);
                    Row {
                        label: module_path(module).to_owned(),
                        module: module.clone(),
                        depth: *depth,
                        cells: row_cells,
                    }
                })
                .collect();
            bands.push(Band { direction, rows });
        }
        let first_source = first_source.and_then(|(id, column, step, rank, node)| {
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
        let (depth, depth_rule) = self.depth.unwrap_or((1, DepthRule::TopLevel));
        DivergenceMap {
            mode: self.mode,
            depth,
            depth_rule,
            axis: self.shape.columns,
            steps: self.steps().collect(),
            ranks: self.ranks.clone(),
            columns,
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
pub struct MapProgress<'a, M = DivergenceMap> {
    /// Graphs (a step and rank) read, of the total to read.
    pub graphs_read: usize,
    pub graphs_total: usize,
    /// After each judged step, when asked for: the map of the steps judged so far (the columns
    /// of the later steps not there yet).
    pub partial: Option<&'a M>,
    /// When asked for, while the first step is read (so that the first cells need not wait for
    /// the whole step: every rank's graph is read before a step is judged): with a graph read,
    /// at most every [`PREVIEW_EVERY`], the map of the graphs read so far. Its cells are judged
    /// as the graph is read, against the tolerances before the step's tightening from its own
    /// ranks (the dtype table, or the reference's) and without source or peer marks (the step's
    /// sources are known once all its ranks are judged); only the columns read so far. The
    /// judged step's map (`partial`) replaces it.
    pub preview: Option<&'a M>,
}

/// How often, at most, a map of the graphs read so far is handed out while the first step is
/// read ([`MapProgress::preview`]).
pub const PREVIEW_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// [`divergence_map`], telling `progress` each graph read and (with `partial`) handing it the
/// map of the steps judged so far after each step.
pub fn divergence_map_with_progress(
    file: &CompareFile,
    opts: &Options,
    map: &MapOptions,
    partial: bool,
    progress: &mut dyn FnMut(MapProgress<'_>),
) -> Result<(Diagnosis, DivergenceMap), DiagnoseError> {
    let (d, fine) = fine_map_with_progress(file, opts, map.shape(), partial, &mut |p| {
        let so_far = p.partial.map(|f| f.aggregate(map.max_columns));
        let preview = p.preview.map(|f| f.aggregate(map.max_columns));
        progress(MapProgress {
            graphs_read: p.graphs_read,
            graphs_total: p.graphs_total,
            partial: so_far.as_ref(),
            preview: preview.as_ref(),
        });
    })?;
    Ok((d, fine.aggregate(map.max_columns)))
}

/// Diagnoses `file` (as [`crate::diagnose()`] with `opts`) and builds its map of full resolution
/// in `shape` from the same judgements, telling `progress` each graph read and (with `partial`)
/// handing it the map of the steps judged so far after each step.
pub fn fine_map_with_progress(
    file: &CompareFile,
    opts: &Options,
    shape: MapShape,
    partial: bool,
    progress: &mut dyn FnMut(MapProgress<'_, FineMap>),
) -> Result<(Diagnosis, FineMap), DiagnoseError> {
    /// The map of the first step's graphs read so far ([`MapProgress::preview`]).
    struct Preview {
        /// The judged map (no step yet) with the rows of the graphs read so far.
        map: FineMap,
        cells: StepCells,
        step: i64,
        /// When one was last handed out; whether one is due with the next graph read.
        shown: Option<std::time::Instant>,
        due: bool,
    }
    struct Visitor<'p> {
        fine: FineMap,
        partial: bool,
        read: (usize, usize),
        progress: &'p mut dyn FnMut(MapProgress<'_, FineMap>),
        /// Until the first step is judged (with `partial`): the preview and the options its
        /// cells are judged with (no tightening from the step's own ranks).
        previewing: bool,
        preview: Option<Preview>,
        plain: Options,
    }
    impl StepVisitor for Visitor<'_> {
        fn graph_loaded(&mut self, position: usize, data: &RankData) {
            if !self.previewing {
                return;
            }
            let p = self.preview.get_or_insert_with(|| Preview {
                map: self.fine.clone(),
                cells: StepCells::default(),
                step: data.step,
                shown: None,
                due: false,
            });
            let order = data.npu.execution_order();
            p.map
                .decide_depth(std::iter::once((&data.npu, order.as_slice())));
            let judge = Judge::new(p.map.mode, &self.plain, data, &order);
            p.map.add_rank(
                &mut p.cells,
                position,
                data,
                &order,
                &|i| judge.node(i),
                None,
            );
            p.due = p.shown.is_none_or(|t| t.elapsed() >= PREVIEW_EVERY);
        }
        fn graph_read(&mut self, read: usize, total: usize) {
            self.read = (read, total);
            let preview = self.preview.as_mut().filter(|p| p.due).map(|p| {
                p.due = false;
                p.shown = Some(std::time::Instant::now());
                let mut m = p.map.clone();
                let step = p.cells.clone().finish(p.step, m.rows.len(), None);
                m.steps.push(std::sync::Arc::new(step));
                m
            });
            (self.progress)(MapProgress {
                graphs_read: read,
                graphs_total: total,
                partial: None,
                preview: preview.as_ref(),
            });
        }
        fn step(&mut self, ranks: &[RankJudgements<'_>], d: &Diagnosis) {
            self.previewing = false;
            self.preview = None;
            self.fine.add_step(ranks, d);
            if self.partial {
                (self.progress)(MapProgress {
                    graphs_read: self.read.0,
                    graphs_total: self.read.1,
                    partial: Some(&self.fine),
                    preview: None,
                });
            }
        }
    }
    // The steps judged: those holding graphs, not all the file lists.
    let steps = file.graphs_to_visit(opts.step, opts.rank)?.len();
    let mut visitor = Visitor {
        fine: FineMap::new(file.mode(), shape, steps),
        partial,
        read: (0, 0),
        progress,
        previewing: partial,
        preview: None,
        plain: Options {
            tighten: false,
            ..opts.clone()
        },
    };
    let d = diagnose_visiting(file, opts, &mut visitor)?;
    Ok((d, visitor.fine))
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
        // Names: the node of rank k is k, its first source 10 + k.
        let cell = |ratio: Option<f64>, rank: u32, sources: u32| FineCell {
            output: ratio.map(|r| (r, 1.0)),
            micro_step: 0,
            node: rank,
            sources,
            source: (sources > 0).then_some(10 + rank),
            from_rank: None,
        };
        let names: Vec<Box<str>> = (0..20)
            .map(|k| {
                if k < 10 {
                    format!("n{k}")
                } else {
                    format!("s{}", k - 10)
                }
                .into()
            })
            .collect();
        let mut j = Joined::new(cell(Some(0.5), 0, 1), 0);
        j.join(cell(Some(3.0), 1, 0), 1);
        j.join(cell(None, 2, 2), 2);
        j.join(cell(Some(f64::INFINITY), 3, 0), 3);
        let a = j.cell(0, &names);
        assert_eq!((a.rank, a.sources, a.node.as_str()), (3, 3, "n3"));
        assert_eq!((a.source.as_deref(), a.source_rank), (Some("s0"), Some(0)));
    }

    #[test]
    fn a_ratio_against_a_zero_tolerance_is_infinite_unless_equal() {
        assert_eq!(ratio(0.0, 0.0), 0.0);
        assert_eq!(ratio(1e-9, 0.0), f64::INFINITY);
        assert_eq!(ratio(0.02, 0.01), 2.0);
    }
}
