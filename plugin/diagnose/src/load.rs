//! Reading a compare `.vis.db` into the typed graphs the rules work on: for one step and rank,
//! both sides (target `NPU` and golden `Bench`), each node with its parent, its children in the
//! hierarchy's order, its match and its entries.
//!
//! A file we wrote holds what this reads in a table of our own ([`crate::compact`]), read
//! instead of the rows when it is there and still true of them (stamped with the file's
//! version, no row edited since, as many nodes as rows). Otherwise each side's rows are read once, borrowed from SQLite and parsed as
//! they come. Either way the two sides are read at once on two connections. Nothing is written.

use std::path::Path;

use graph_ascend_visdb::store::{ConfigRow, GraphKey, GraphRow, Side};
use graph_ascend_visdb::Store;
use serde_json::Value;

use crate::compact::{read_side, DecodedSide};
use crate::entry::{parse_entries, parse_entries_text_into, Entry};
use crate::error::DiagnoseError;
pub use crate::graph::{Direction, NameIndex, Node, NodeRef, RankData, SideGraph};
use crate::graph::{List, NameKey};

/// The comparison a file holds (`tb_config.task`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `summary`: Max, Min, Mean, Norm of each tensor.
    Statistics,
    /// `all`: real-data metrics (Cosine, MaxAbsErr…) besides the statistics.
    Tensor,
    /// `md5`: a CRC32 of each tensor, equal or not.
    Md5,
}

impl Mode {
    fn of_task(task: &str) -> Option<Mode> {
        match task {
            "summary" => Some(Mode::Statistics),
            "all" => Some(Mode::Tensor),
            "md5" => Some(Mode::Md5),
            _ => None,
        }
    }
}

/// `tb_config.task` of a structure-only compare (dumps of `task: structure`, without data).
pub(crate) const STRUCTURE_TASK: &str = "structure";

/// An open compare file.
pub struct CompareFile {
    store: Store,
    config: ConfigRow,
    mode: Mode,
    /// The file holds our own table of what the load reads ([`crate::compact`]).
    compact: bool,
    /// The connection the golden side is read on, kept from one load to the next (opening one
    /// per graph cost more than reading a small graph).
    golden: std::sync::Mutex<Option<Store>>,
}

impl CompareFile {
    /// Opens `path` and checks that it is a compare file with a known comparison mode.
    pub fn open(path: &Path) -> Result<CompareFile, DiagnoseError> {
        CompareFile::from_store(Store::open(path)?)
    }

    /// Uses an already open store (the service's).
    pub fn from_store(store: Store) -> Result<CompareFile, DiagnoseError> {
        let config = store.config()?;
        if !config.is_compare() {
            return Err(DiagnoseError::NotCompare {
                path: store.path().to_owned(),
                reason: format!(
                    "its graph_type is {:?}: only a compare file (a target against a golden run) \
                     can be diagnosed",
                    config.graph_type
                ),
            });
        }
        if config.task == STRUCTURE_TASK {
            return Err(DiagnoseError::StructureOnly {
                path: store.path().to_owned(),
            });
        }
        let mode = Mode::of_task(&config.task).ok_or_else(|| DiagnoseError::NotCompare {
            path: store.path().to_owned(),
            reason: format!("unknown comparison task {:?}", config.task),
        })?;
        Ok(CompareFile {
            compact: store.has_diagnosis_table()?,
            store,
            config,
            mode,
            golden: std::sync::Mutex::default(),
        })
    }

    pub fn path(&self) -> &Path {
        self.store.path()
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Steps of the file, ascending (`[0]` when the config lists none).
    pub fn steps(&self) -> Vec<i64> {
        sorted_or_zero(&self.config.steps)
    }

    /// Ranks of the file, ascending (`[0]` when the config lists none).
    pub fn ranks(&self) -> Vec<i64> {
        sorted_or_zero(&self.config.ranks)
    }

    /// The graphs to visit: the file's steps (or `step`) in order, with those of the file's
    /// ranks (or `rank`) that hold a graph at that step, in order. Listed graphs that are not
    /// in the file are left out, so a file listing millions of ranks or 65,536 steps costs the
    /// graphs it holds, not its lists: of all steps, those holding a graph of a selected rank
    /// (the first listed one, with no ranks, when none does); a step asked for is kept even
    /// when it holds none.
    pub fn graphs_to_visit(
        &self,
        step: Option<i64>,
        rank: Option<i64>,
    ) -> Result<Vec<(i64, Vec<i64>)>, DiagnoseError> {
        let ranks: std::collections::HashSet<i64> = rank
            .map_or_else(|| self.ranks(), |r| vec![r])
            .into_iter()
            .collect();
        let steps = step.map_or_else(|| self.steps(), |s| vec![s]);
        let selected: std::collections::HashSet<i64> = steps.iter().copied().collect();
        // In (step, rank) order, as `graphs_present` reads them.
        let mut graphs: Vec<(i64, Vec<i64>)> = Vec::new();
        for (s, r) in self.store.graphs_present()? {
            if !ranks.contains(&r) || !selected.contains(&s) {
                continue;
            }
            match graphs.last_mut() {
                Some((last, held)) if *last == s => held.push(r),
                _ => graphs.push((s, vec![r])),
            }
        }
        if graphs.is_empty() {
            graphs.push((steps[0], Vec::new()));
        }
        Ok(graphs)
    }

    /// Checks a requested step and rank against the file's lists.
    pub fn check_selection(
        &self,
        step: Option<i64>,
        rank: Option<i64>,
    ) -> Result<(), DiagnoseError> {
        let path = || self.path().to_owned();
        if let Some(step) = step {
            let steps = self.steps();
            if !steps.contains(&step) {
                return Err(DiagnoseError::UnknownStep {
                    path: path(),
                    step,
                    known: steps,
                });
            }
        }
        if let Some(rank) = rank {
            let ranks = self.ranks();
            if !ranks.contains(&rank) {
                return Err(DiagnoseError::UnknownRank {
                    path: path(),
                    rank,
                    known: ranks,
                });
            }
        }
        Ok(())
    }

    /// Reads both sides of one step and rank: from our own table when it holds them and they
    /// are still true of the rows (its stamp is the file's version, no row of the graph edited),
    /// else from the rows.
    pub fn load(&self, step: i64, rank: i64) -> Result<RankData, DiagnoseError> {
        if self.compact
            && !self.store.graph_edited(step, rank)?
            && self.store.diagnosis_table_current()?
        {
            if let Some(data) = self.load_compact(step, rank)? {
                return Ok(data);
            }
        }
        self.load_rows(step, rank)
    }

    /// Whether the file holds our own table (its graphs may still be read from the rows, when
    /// edited since).
    pub fn has_compact_table(&self) -> bool {
        self.compact
    }

    /// Both sides from the rows, whatever the file holds besides.
    pub fn load_rows(&self, step: i64, rank: i64) -> Result<RankData, DiagnoseError> {
        let (npu, bench) = self.both_sides(step, rank, |store, side| {
            load_side(store, GraphKey { side, step, rank }, side == Side::Npu)
        })?;
        Ok(linked(step, rank, npu, bench))
    }

    /// Both sides from our table; `None` when a side's parts are missing, do not decode or do
    /// not match the rows.
    fn load_compact(&self, step: i64, rank: i64) -> Result<Option<RankData>, DiagnoseError> {
        let (npu, bench) = self.both_sides(step, rank, |store, side| {
            read_side(store, GraphKey { side, step, rank })
        })?;
        let (
            Some(DecodedSide {
                side: npu,
                partners: Some(partners),
            }),
            Some(DecodedSide {
                side: bench,
                partners: None,
            }),
        ) = (npu, bench)
        else {
            return Ok(None);
        };
        if partners.len() != npu.nodes.len()
            || partners
                .iter()
                .flatten()
                .any(|&p| p as usize >= bench.nodes.len())
        {
            return Ok(None);
        }
        Ok(Some(RankData {
            step,
            rank,
            npu,
            bench,
            partners,
        }))
    }

    /// `read` of the target side on this file's connection and of the golden side on one of
    /// its own, at once (a connection is used by one thread at a time).
    fn both_sides<T: Send>(
        &self,
        step: i64,
        rank: i64,
        read: impl Fn(&Store, Side) -> Result<T, DiagnoseError> + Sync,
    ) -> Result<(T, T), DiagnoseError> {
        let path = self.path();
        let golden = &self.golden;
        let kept = golden.lock().ok().and_then(|mut g| g.take());
        let mut bench = None;
        let npu = rayon::in_place_scope(|s| {
            s.spawn(|_| {
                bench = Some(
                    kept.map_or_else(|| Store::open(path), Ok)
                        .map_err(DiagnoseError::from)
                        .and_then(|store| {
                            let read = read(&store, Side::Bench);
                            if let Ok(mut g) = golden.lock() {
                                *g = Some(store);
                            }
                            read
                        }),
                );
            });
            read(&self.store, Side::Npu)
        });
        let bench = bench.ok_or_else(|| DiagnoseError::Data {
            path: path.to_owned(),
            what: format!("the golden side of step {step}, rank {rank}"),
            reason: "its reader stopped".into(),
        })?;
        Ok((npu?, bench?))
    }

    /// The store, for other reads (the CSV export).
    pub fn store(&self) -> &Store {
        &self.store
    }
}

fn sorted_or_zero(list: &[i64]) -> Vec<i64> {
    let mut v = list.to_vec();
    v.sort_unstable();
    v.dedup();
    if v.is_empty() {
        v.push(0);
    }
    v
}

/// Both sides of one step and rank from the rows of `store`, one after the other on its one
/// connection (the writer of our table reads a file it is editing so).
pub(crate) fn load_rows_on(store: &Store, step: i64, rank: i64) -> Result<RankData, DiagnoseError> {
    let npu = load_side(
        store,
        GraphKey {
            side: Side::Npu,
            step,
            rank,
        },
        true,
    )?;
    let bench = load_side(
        store,
        GraphKey {
            side: Side::Bench,
            step,
            rank,
        },
        false,
    )?;
    Ok(linked(step, rank, npu, bench))
}

/// The two sides with each target node's partner resolved among the golden nodes.
fn linked(step: i64, rank: i64, npu: LoadedSide, bench: LoadedSide) -> RankData {
    let partners = npu
        .partners
        .into_iter()
        .map(|link| link.and_then(|l| bench.by_key.as_ref()?.get(l)))
        .collect();
    RankData {
        step,
        rank,
        npu: npu.graph,
        bench: bench.graph,
        partners,
    }
}

/// One side as read from its rows, before the target's partners are resolved.
struct LoadedSide {
    graph: SideGraph,
    /// Per node, the key of its partner's name (the target side's; empty for the golden side).
    partners: Vec<Option<NameKey>>,
    /// The side's nodes by the keys of their names.
    by_key: Option<KeyTable>,
}

/// Node numbers by the [`NameKey`] of their names, filled as a side's rows are read: each
/// node's key, and a table at most half full of node numbers, each beside a few bits of its
/// key's hash (a slot of another name is passed over without reading its key, mostly), found by
/// the key's hash and checked against the node's key. A lookup reads one or two places; the
/// binary search of [`NameIndex`]'s sorted hashes (about twenty reads of a 12 MB array, then the
/// node's name hashed again) was a third of the CPU of loading a 1M-node side. The first node of
/// a name wins.
#[derive(Debug)]
struct KeyTable {
    keys: Vec<NameKey>,
    /// 0: empty; else the node number + 1 in the bits of `node_mask`, the bits of its key's
    /// hash in the others. A power of two long, at least twice as long as `keys`.
    slots: Vec<u32>,
    /// The low bits that hold every node number + 1 the table is sized for.
    node_mask: u32,
}

impl KeyTable {
    /// An empty table for `nodes` nodes (it grows past them if more come).
    fn with_capacity(nodes: usize) -> KeyTable {
        KeyTable {
            keys: Vec::with_capacity(nodes),
            slots: vec![0; (nodes * 2).next_power_of_two().max(2)],
            node_mask: u32::MAX
                .checked_shr((nodes.leading_zeros() + u32::BITS).saturating_sub(usize::BITS))
                .unwrap_or(0),
        }
    }

    /// Adds the next node, whose name's key is `key`; `true` when no node before had its name.
    fn push(&mut self, key: NameKey) -> bool {
        let nodes = self.keys.len() + 1;
        if nodes * 2 > self.slots.len() || nodes as u64 > u64::from(self.node_mask) {
            *self = KeyTable {
                keys: std::mem::take(&mut self.keys),
                ..KeyTable::with_capacity(nodes * 2)
            };
            for node in 0..self.keys.len() {
                self.file(node);
            }
        }
        self.keys.push(key);
        self.file(self.keys.len() - 1)
    }

    /// Puts `node` in its slot, unless an earlier node of its key holds one (then `false`).
    fn file(&mut self, node: usize) -> bool {
        let key = self.keys[node];
        let (mask, tag) = (self.slots.len() - 1, self.tag(key));
        let mut at = self.home(key);
        loop {
            match self.slots[at] {
                0 => {
                    self.slots[at] = tag | (node as u32 + 1);
                    return true;
                }
                taken if self.holds(taken, tag, key).is_some() => return false,
                _ => at = (at + 1) & mask,
            }
        }
    }

    /// The first slot to look at for `key` (Fibonacci hashing of its hash's bits).
    fn home(&self, key: NameKey) -> usize {
        let bits = self.slots.len().trailing_zeros();
        (key.hash().wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
    }

    /// The bits of `key`'s hash a slot keeps beside its node number.
    fn tag(&self, key: NameKey) -> u32 {
        key.hash() as u32 & !self.node_mask
    }

    /// The node of a taken slot when it is `key`'s.
    fn holds(&self, slot: u32, tag: u32, key: NameKey) -> Option<u32> {
        let node = (slot & self.node_mask).checked_sub(1)?;
        (slot & !self.node_mask == tag && self.keys[node as usize] == key).then_some(node)
    }

    /// The first node of the name whose key is `key`.
    fn get(&self, key: NameKey) -> Option<u32> {
        let (mask, tag) = (self.slots.len() - 1, self.tag(key));
        let mut at = self.home(key);
        loop {
            match self.slots[at] {
                0 => return None,
                taken => {
                    if let Some(node) = self.holds(taken, tag, key) {
                        return Some(node);
                    }
                    at = (at + 1) & mask;
                }
            }
        }
    }
}

/// A parent or a child as the rows name it: the node, when a node of that name was read before
/// (the first of that name: a later one cannot take it), else the number of its key among the
/// [`Links`]' pending keys, looked up once every node is read. 4 bytes instead of a key's 16.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Link(u32);

impl Link {
    const PENDING: u32 = 1 << 31;
    /// No name (an empty `up_node`: the root).
    const NONE: Link = Link(u32::MAX);
    /// A parent not read yet, whose key is in [`Links::open`].
    const OPEN: Link = Link(u32::MAX - 1);
    /// The last number of a pending key.
    const LAST_PENDING: u32 = Link::PENDING - 3;
}

/// The parents and children the rows name, until they are resolved to indexes: a 1M-node side
/// lists two million names, and a copy of each (or a string each, or even a key each) would be
/// most of the load's memory at its peak.
#[derive(Debug)]
struct Links {
    /// The nodes read so far by name.
    by_key: KeyTable,
    /// Per node: its `up_node` ([`Link::NONE`]: empty, the root; [`Link::OPEN`]: in `open`).
    up: Vec<Link>,
    /// Per node: where its `sub_nodes` end in `subs` (they start where the node before's end).
    ends: Vec<u32>,
    /// Every `sub_nodes` name.
    subs: Vec<Link>,
    /// The keys of children's names that no node read before had.
    pending: Vec<NameKey>,
    /// The nodes whose parent was not read before them, with the key of its name, until a
    /// parent that lists them among its children is read. msprobe writes a module after what
    /// it calls, so this holds the nodes of the modules still open, not a key for every node.
    open: foldhash::HashMap<u32, NameKey>,
    /// The first node without a parent.
    root: Option<u32>,
}

impl Links {
    fn with_capacity(nodes: usize) -> Links {
        Links {
            by_key: KeyTable::with_capacity(nodes),
            up: Vec::with_capacity(nodes),
            ends: Vec::with_capacity(nodes),
            subs: Vec::with_capacity(nodes),
            pending: Vec::new(),
            open: Default::default(),
            root: None,
        }
    }

    /// The next node's name, `up_node` and `sub_nodes`.
    fn push<S: AsRef<str>>(&mut self, name: &str, up: &str, sub_nodes: &[S]) {
        let node = self.up.len() as u32;
        let key = NameKey::of(name);
        // First the node itself: a node that names itself finds itself (or an earlier namesake).
        let first_of_name = self.by_key.push(key);
        if up.is_empty() && self.root.is_none() {
            self.root = Some(node);
        }
        let up = if up.is_empty() {
            Link::NONE
        } else {
            let up = NameKey::of(up);
            match self.by_key.get(up) {
                Some(parent) if parent < Link::PENDING => Link(parent),
                _ => {
                    self.open.insert(node, up);
                    Link::OPEN
                }
            }
        };
        self.up.push(up);
        for sub in sub_nodes {
            let sub = self.link(sub.as_ref());
            // A child read before, waiting for a parent of this name: this node is that
            // parent, the first of its name.
            if first_of_name && sub.0 < Link::PENDING && self.open.get(&sub.0) == Some(&key) {
                self.open.remove(&sub.0);
                self.up[sub.0 as usize] = Link(node);
            }
            self.subs.push(sub);
        }
        self.ends.push(self.subs.len() as u32);
    }

    /// A child's link.
    fn link(&mut self, name: &str) -> Link {
        let key = NameKey::of(name);
        match self.by_key.get(key) {
            Some(node) if node < Link::PENDING => Link(node),
            _ => {
                self.pending.push(key);
                // Past 2³¹ - 3 pending names (a side of billions of nodes) the last ones share
                // a number and resolve as the last: no graph comes near.
                Link(Link::PENDING | (self.pending.len() as u32 - 1).min(Link::LAST_PENDING))
            }
        }
    }

    /// `node`'s parent, once every node is read.
    fn parent(&self, node: usize) -> Option<u32> {
        match self.up[node] {
            Link::NONE => None,
            Link::OPEN => self.by_key.get(*self.open.get(&(node as u32))?),
            up => self.resolve(up),
        }
    }

    /// The node a child's link names, once every node is read.
    fn resolve(&self, link: Link) -> Option<u32> {
        if link.0 & Link::PENDING == 0 {
            return Some(link.0);
        }
        let key = self.pending.get((link.0 & !Link::PENDING) as usize)?;
        self.by_key.get(*key)
    }

    fn sub_nodes(&self, node: usize) -> &[Link] {
        let start = node.checked_sub(1).map_or(0, |before| self.ends[before]);
        &self.subs[start as usize..self.ends[node] as usize]
    }
}

/// Adds the node of `row` to `side` (parent and children still unresolved). `entries` is a
/// buffer lent for reading its inputs and outputs (they are then moved into the side's own
/// entries: no vector of their own).
fn push_row(
    side: &mut SideGraph,
    path: &Path,
    row: &GraphRow<'_>,
    entries: &mut Vec<Entry>,
) -> Result<(), DiagnoseError> {
    let name = &*row.name;
    let object =
        |what: &str, text: &str| -> Result<serde_json::Map<String, Value>, DiagnoseError> {
            match graph_ascend_visdb::json::parse_lenient(text) {
                Ok(Some(Value::Object(map))) => Ok(map),
                Ok(None) | Ok(Some(Value::Null)) => Ok(Default::default()),
                Ok(Some(_)) => Err(DiagnoseError::Data {
                    path: path.to_owned(),
                    what: format!("{what} of node {name}"),
                    reason: "expected a JSON object".into(),
                }),
                Err(e) => Err(DiagnoseError::Data {
                    path: path.to_owned(),
                    what: format!("{what} of node {name}"),
                    reason: e.to_string(),
                }),
            }
        };
    // The fast reader first; the lenient tree (bare NaN…, and its errors by name) otherwise.
    entries.clear();
    if !parse_entries_text_into(name, &row.input_data, false, entries) {
        entries.extend(parse_entries(
            name,
            &object("input_data", &row.input_data)?,
            false,
        ));
    }
    let inputs = entries.len();
    if !parse_entries_text_into(name, &row.output_data, true, entries) {
        entries.extend(parse_entries(
            name,
            &object("output_data", &row.output_data)?,
            true,
        ));
    }
    let direction = if name.contains(".backward") {
        Direction::Backward
    } else {
        Direction::Forward
    };
    let mut node = Node::new(
        row.node_type,
        direction,
        name.contains(".parameters_grad"),
        row.micro_step_id,
    );
    node.peers = peers(&row.matched_distributed);
    side.push(name, node, entries.drain(..), inputs)
        .map_err(|_| DiagnoseError::Data {
            path: path.to_owned(),
            what: format!("node {name}"),
            reason: "the graph is too large (4 GiB of names or 4 billion entries)".into(),
        })?;
    Ok(())
}

/// `{"nodes_info": {"1": ["0", "Distributed.recv.0.forward"]}}` → `[(1, "Distributed.recv…")]`.
fn peers(matched_distributed: &Value) -> List<(i64, Box<str>)> {
    let Some(info) = matched_distributed
        .get("nodes_info")
        .and_then(Value::as_object)
    else {
        return List::default();
    };
    info.iter()
        .filter_map(|(rank, v)| {
            let rank = rank.trim().parse::<i64>().ok()?;
            let node = v.as_array()?.get(1)?.as_str()?;
            Some((rank, node.into()))
        })
        .collect()
}

/// One side, read in one pass of borrowed rows, each parsed as it comes; with `partners`, also
/// the key of each node's golden partner (the last name of `matched_node_link`), in node order.
fn load_side(store: &Store, graph: GraphKey, partners: bool) -> Result<LoadedSide, DiagnoseError> {
    // Sized once: a million nodes grown by doubling would be copied and faulted in again and again.
    let rows = store.count_graph_rows(graph)?;
    let mut side = SideBuilder::new(store.path(), rows, partners);
    store.scan_graph_rows(graph, |row| side.push(&row))?;
    Ok(side.finish())
}

/// One side made of its rows given one at a time in node order: what the load makes of a side's
/// rows (the converter gives it the rows it writes, for our table, [`crate::table`]).
pub(crate) struct SideBuilder {
    path: std::path::PathBuf,
    side: SideGraph,
    links: Links,
    partners: bool,
    partner_keys: Vec<Option<NameKey>>,
    entries: Vec<Entry>,
}

impl SideBuilder {
    /// A side of about `rows` rows of the file at `path` (named by errors); `partners`: the
    /// target side, whose rows name their golden partners.
    pub(crate) fn new(path: &Path, rows: usize, partners: bool) -> SideBuilder {
        SideBuilder {
            path: path.to_owned(),
            side: SideGraph::with_capacity(rows),
            links: Links::with_capacity(rows),
            partners,
            partner_keys: Vec::with_capacity(if partners { rows } else { 0 }),
            entries: Vec::new(),
        }
    }

    /// The next row.
    pub(crate) fn push(&mut self, row: &GraphRow<'_>) -> Result<(), DiagnoseError> {
        push_row(&mut self.side, &self.path, row, &mut self.entries)?;
        self.links.push(&row.name, &row.up_node, &row.sub_nodes);
        if self.partners {
            self.partner_keys.push(row.link.as_deref().map(NameKey::of));
        }
        Ok(())
    }

    /// The side, linked.
    fn finish(self) -> LoadedSide {
        let (side, root, by_key) = link(self.side, self.links);
        // Only the golden side's nodes are looked up by key after their own links.
        let by_key = (!self.partners).then_some(by_key);
        LoadedSide {
            graph: side_graph(side, root),
            partners: self.partner_keys,
            by_key,
        }
    }
}

/// Both sides of one step and rank from their builders, linked.
pub(crate) fn built(step: i64, rank: i64, npu: SideBuilder, bench: SideBuilder) -> RankData {
    linked(step, rank, npu.finish(), bench.finish())
}

/// Resolves parents and children to indexes. Children come from `sub_nodes` (their order is
/// the hierarchy's); a child listed there but missing, or listed twice, is skipped. Gives the
/// side, its root and its nodes by key.
fn link(mut side: SideGraph, links: Links) -> (SideGraph, Option<u32>, KeyTable) {
    for (i, node) in side.nodes.iter_mut().enumerate() {
        node.parent = links.parent(i);
        node.children = links
            .sub_nodes(i)
            .iter()
            .filter_map(|&c| links.resolve(c))
            .filter(|&c| c as usize != i)
            .collect();
    }
    (side, links.root, links.by_key)
}

/// The linked `side`, finished: updates marked, its dtype family, its names indexed.
fn side_graph(mut side: SideGraph, root: Option<u32>) -> SideGraph {
    // Everything inside an update node is an update, whatever its name says.
    let in_update: Vec<bool> = (0..side.nodes.len())
        .map(|i| {
            let mut next = Some(i as u32);
            let mut left = side.nodes.len();
            while let (Some(k), true) = (next, left > 0) {
                if matches!(side.name(k), "optimizer" | "clip_grad") {
                    return true;
                }
                next = side.nodes[k as usize].parent;
                left -= 1;
            }
            false
        })
        .collect();
    for (node, update) in side.nodes.iter_mut().zip(in_update) {
        if update {
            node.direction = Direction::Update;
        }
    }
    side.torch = side
        .all_entries()
        .iter()
        .find(|e| e.kind() == crate::entry::Kind::Tensor)
        .map(|e| e.torch_dtype());
    side.root = root;
    // Indexed once the links are dropped: the peak of the load is while they are resolved.
    side.index_names();
    side
}

/// Nodes for other modules' unit tests.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// An API node, forward, without entries.
    pub fn node() -> Node {
        Node::new(1, Direction::Forward, false, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed<'a>(
        name: &'a str,
        up: &'a str,
        subs: &'a [&'a str],
    ) -> (&'a str, &'a str, &'a [&'a str]) {
        (name, up, subs)
    }

    fn link_all(parsed: Vec<(&str, &str, &[&str])>) -> SideGraph {
        let mut links = Links::with_capacity(0);
        let mut side = SideGraph::default();
        for (name, up, subs) in parsed {
            links.push(name, up, subs);
            let node = Node::new(0, Direction::Forward, false, 0);
            side.push(name, node, [], 0).expect("small");
        }
        let (side, root, _) = link(side, links);
        side_graph(side, root)
    }

    fn names(g: &SideGraph, order: &[u32]) -> Vec<String> {
        order.iter().map(|&i| g.name(i).to_string()).collect()
    }

    #[test]
    fn execution_order_follows_the_hierarchy_not_the_file_order() {
        // File order (node_order) deliberately scrambled; sub_nodes give the order things ran.
        let g = link_all(vec![
            parsed("b.backward", "root", &["b2.backward", "b1.backward"]),
            parsed("b1.backward", "b.backward", &[]),
            parsed("root", "", &["a.forward", "b.backward"]),
            parsed("a.forward", "root", &["a1.forward", "a2.forward"]),
            parsed("a2.forward", "a.forward", &[]),
            parsed("a1.forward", "a.forward", &[]),
            parsed("b2.backward", "b.backward", &[]),
            parsed("orphan", "missing", &[]),
        ]);
        assert_eq!(
            names(&g, &g.execution_order()),
            [
                "a1.forward",
                "a2.forward",
                "a.forward",
                "b2.backward",
                "b1.backward",
                "b.backward",
                "root",
                "orphan"
            ]
        );
    }

    #[test]
    fn the_key_table_finds_the_first_node_of_each_name() {
        let names: Vec<String> = (0..5000)
            .map(|i| format!("Module.layer.{}", i % 3000))
            .collect();
        // Sized for fewer nodes than come: it grows.
        let mut table = KeyTable::with_capacity(10);
        for name in &names {
            table.push(NameKey::of(name));
        }
        for (i, name) in names.iter().enumerate() {
            assert_eq!(table.get(NameKey::of(name)), Some((i % 3000) as u32));
        }
        assert_eq!(table.get(NameKey::of("Module.layer.3000")), None);
        assert_eq!(KeyTable::with_capacity(0).get(NameKey::of("")), None);
    }

    #[test]
    fn a_name_given_twice_links_to_its_first_node_before_and_after_it_is_read() {
        let g = link_all(vec![
            parsed("early", "dup", &[]),
            parsed("root", "", &["dup", "early", "late"]),
            parsed("dup", "root", &["early"]),
            parsed("dup", "root", &["late"]),
            parsed("late", "dup", &[]),
            parsed("self", "self", &["self", "late"]),
        ]);
        assert_eq!(g.root, Some(1));
        assert_eq!(g.nodes[0].parent, Some(2));
        assert_eq!(g.nodes[4].parent, Some(2));
        assert_eq!(&*g.nodes[1].children, [2, 0, 4]);
        assert_eq!(&*g.nodes[3].children, [4]);
        // A node named as its own parent is its own parent; as its own child, skipped.
        assert_eq!(g.nodes[5].parent, Some(5));
        assert_eq!(&*g.nodes[5].children, [4]);
    }

    #[test]
    fn a_parent_read_after_its_child_is_found_whether_it_lists_the_child_or_not() {
        let g = link_all(vec![
            parsed("unlisted", "p", &[]),
            parsed("listed", "p", &[]),
            parsed("twice", "q", &[]),
            parsed("p", "", &["listed"]),
            parsed("q", "", &[]),
            parsed("q", "", &["twice"]),
        ]);
        assert_eq!(g.nodes[0].parent, Some(3));
        assert_eq!(g.nodes[1].parent, Some(3));
        // The first node of the name, not the later one that lists it.
        assert_eq!(g.nodes[2].parent, Some(4));
        assert_eq!(&*g.nodes[5].children, [2]);
        assert_eq!(g.root, Some(3));
    }

    #[test]
    fn a_cycle_in_the_hierarchy_ends_the_walk() {
        let g = link_all(vec![
            parsed("root", "", &["x"]),
            parsed("x", "root", &["y"]),
            parsed("y", "x", &["x"]),
        ]);
        assert_eq!(names(&g, &g.execution_order()), ["y", "x", "root"]);
        // The ancestor walk is bounded too.
        let mut cyclic = link_all(vec![parsed("p", "q", &[]), parsed("q", "p", &[])]);
        cyclic.nodes[0].parent = Some(1);
        cyclic.nodes[1].parent = Some(0);
        assert!(cyclic.ancestors(0).count() <= 2);
    }

    #[test]
    fn nodes_inside_the_optimizer_are_updates() {
        let g = link_all(vec![
            parsed("root", "", &["optimizer", "m.backward.0"]),
            parsed("optimizer", "root", &["Tensor.add_.0.forward"]),
            parsed("Tensor.add_.0.forward", "optimizer", &[]),
            parsed("m.backward.0", "root", &[]),
        ]);
        let dir = |name: &str| g.nodes[g.find(name).unwrap() as usize].direction;
        assert_eq!(dir("Tensor.add_.0.forward"), Direction::Update);
        assert_eq!(dir("root"), Direction::Forward);
    }
}
