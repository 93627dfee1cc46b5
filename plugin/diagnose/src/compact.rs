//! Our own table of what the diagnosis reads ([`graph_ascend_visdb::schema::DIAGNOSIS_TABLE`]):
//! each side of each graph as the load makes it from the rows (nodes, parents, children,
//! partners, entries with their statistics as numbers), in a compact binary form, so that a
//! diagnosis of a file we wrote never reads the rows' JSON.
//!
//! The form (all integers LEB128, signed ones zig-zag; `opt` is 0 for none, else index + 1; a
//! text is its length then its UTF-8 bytes; `f64` its 8 bits little-endian):
//!
//! - part 0, the side: [`VERSION`], the number of nodes, the number of entries, `opt` root,
//!   whether the run is PyTorch's (0 unknown, 1 no, 2 yes), whether nodes carry a partner (1 on
//!   the target side).
//! - parts 1…: the nodes in node order, at most [`NODES_PER_PART`] a part and a part cut once it
//!   holds [`PART_TARGET_BYTES`] (a node never spans two parts). A node: name, `opt` parent,
//!   node type, micro step, a byte of direction (bits 0–1) and "parameters' gradients" (bit 2),
//!   children (count, indexes), peers (count, then rank and name each), `opt` partner (when the
//!   side carries them), inputs and outputs (count, entries each).
//! - an entry: its name (an index into the part's names seen so far, + 1; or 0 and the text,
//!   which joins them), a byte of role (bits 0–1), kind (2–3), PyTorch dtype (4), value (5),
//!   md5 (6), metrics (7); the dtype class; a byte saying which of Max, Min, Mean, Norm follow,
//!   then those; the value and md5 texts when flagged; the metrics when flagged (a byte saying
//!   which of Cosine, MaxAbsErr follow, then those); the shape hash (8 bytes).
//!
//! Decoding trusts nothing: every index is checked against the number of nodes, every count
//! against the bytes left, every text for UTF-8, every part's size against
//! [`MAX_DIAGNOSIS_PART_BYTES`] before it is read, and what the decoded side holds against a
//! budget set by the table's size ([`DecodeBudget`]: a crafted table cannot make the load hold
//! much more than a true one of its size would); anything else is [`Corrupt`], and the load then
//! reads the rows.

use graph_ascend_visdb::store::{DiagnosisPart, GraphKey, MAX_DIAGNOSIS_PART_BYTES};
use graph_ascend_visdb::Store;

use crate::entry::{
    shared_name, DtypeClass, Entry, EntryName, Extra, Kind, Role, Stats, TensorMetrics, Text,
};
use crate::error::DiagnoseError;
use crate::graph::{Direction, Node, NodeRef, SideGraph};

/// The form's version (part 0's first number); another version is read as absent.
pub const VERSION: u64 = 2;

/// The most nodes of a part after part 0.
pub const NODES_PER_PART: usize = 4096;

/// A part is cut once it holds this many bytes (a quarter of what a part may hold): a node of
/// up to three quarters of [`MAX_DIAGNOSIS_PART_BYTES`] still fits after it.
pub const PART_TARGET_BYTES: usize = MAX_DIAGNOSIS_PART_BYTES / 4;

/// The fewest bytes an entry takes in the form (name index, role byte, dtype byte, statistics
/// byte, shape hash): part 0's count of entries is checked against the table's bytes by it.
const MIN_ENTRY_BYTES: u64 = 12;

/// What the decoded side may hold per row of the graph (its node, name index and links) beyond
/// what the table's bytes pay for.
const DECODED_BYTES_PER_ROW: u64 = 256;

/// What the decoded side may hold per byte of the table beyond the rows' share. A true table
/// decodes at about 3.5 (0.27 GB of table, 0.96 GB of load at 1M nodes a side, the rows' share
/// included); an entry without statistics (12 bytes, 88 decoded) at 7.3.
const DECODED_BYTES_PER_TABLE_BYTE: u64 = 8;

/// A table part that does not decode: the load reads the rows instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// The parts of one side: part 0, then its nodes; `partners` (the target side's golden partner
/// of each node) when given. `None` when a node alone takes more than a part may hold (the side
/// is then read from its rows).
pub fn encode_side(side: &SideGraph, partners: Option<&[Option<u32>]>) -> Option<Vec<Vec<u8>>> {
    let mut head = Out::default();
    head.u(VERSION);
    head.u(side.nodes.len() as u64);
    head.u(side.all_entries().len() as u64);
    head.opt(side.root);
    head.byte(match side.torch {
        None => 0,
        Some(false) => 1,
        Some(true) => 2,
    });
    head.byte(u8::from(partners.is_some()));
    let mut parts = vec![head.0];
    let mut out = Out::default();
    let mut names: Vec<&str> = Vec::new();
    let mut in_part = 0;
    for k in 0..side.nodes.len() {
        let partner = partners.map(|p| p.get(k).copied().flatten());
        let start = out.0.len();
        encode_node(&mut out, &mut names, side.node(k as u32), partner);
        if out.0.len() - start > MAX_DIAGNOSIS_PART_BYTES - PART_TARGET_BYTES {
            return None;
        }
        in_part += 1;
        if in_part == NODES_PER_PART || out.0.len() >= PART_TARGET_BYTES {
            parts.push(std::mem::take(&mut out.0));
            names.clear();
            in_part = 0;
        }
    }
    if in_part > 0 {
        parts.push(out.0);
    }
    Some(parts)
}

fn encode_node<'n>(
    out: &mut Out,
    names: &mut Vec<&'n str>,
    node: NodeRef<'n>,
    partner: Option<Option<u32>>,
) {
    out.text(node.name());
    out.opt(node.parent);
    out.i(i64::from(node.node_type));
    out.i(node.micro_step);
    let direction = match node.direction {
        Direction::Forward => 0,
        Direction::Backward => 1,
        Direction::Update => 2,
    };
    out.byte(direction | u8::from(node.param_grad) << 2);
    out.u(node.children.len() as u64);
    for &c in &node.children {
        out.u(u64::from(c));
    }
    out.u(node.peers.len() as u64);
    for (rank, name) in node.peers.iter() {
        out.i(*rank);
        out.text(name);
    }
    if let Some(partner) = partner {
        out.opt(partner);
    }
    for entries in [node.inputs(), node.outputs()] {
        out.u(entries.len() as u64);
        for e in entries {
            encode_entry(out, names, e);
        }
    }
}

fn encode_entry<'n>(out: &mut Out, names: &mut Vec<&'n str>, e: &'n Entry) {
    match names.iter().position(|&n| n == e.name()) {
        Some(i) => out.u(i as u64 + 1),
        None => {
            out.u(0);
            out.text(e.name());
            names.push(e.name());
        }
    }
    let role = match e.role() {
        Role::Input => 0,
        Role::Parameter => 1,
        Role::Output => 2,
    };
    let kind = match e.kind() {
        Kind::Tensor => 0,
        Kind::Scalar => 1,
        Kind::Ignored => 2,
    };
    out.byte(
        role | kind << 2
            | u8::from(e.torch_dtype()) << 4
            | u8::from(e.value().is_some()) << 5
            | u8::from(e.md5().is_some()) << 6
            | u8::from(e.metrics().is_some()) << 7,
    );
    out.byte(DTYPES.iter().position(|&d| d == e.dtype()).unwrap_or(0) as u8);
    out.numbers(&e.stats.all());
    if let Some(v) = e.value() {
        out.text(v);
    }
    if let Some(m) = e.md5() {
        out.text(m);
    }
    if let Some(m) = e.metrics() {
        out.numbers(&[m.cosine, m.max_abs_err]);
    }
    out.0.extend_from_slice(&e.shape().to_le_bytes());
}

/// The dtype classes by their number in the form.
const DTYPES: [DtypeClass; 6] = [
    DtypeClass::Exact,
    DtypeClass::Float64,
    DtypeClass::Float32,
    DtypeClass::Float16,
    DtypeClass::BFloat16,
    DtypeClass::Other,
];

/// Bytes being written.
#[derive(Default)]
struct Out(Vec<u8>);

impl Out {
    fn byte(&mut self, b: u8) {
        self.0.push(b);
    }

    fn u(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn i(&mut self, v: i64) {
        self.u(((v << 1) ^ (v >> 63)) as u64);
    }

    fn opt(&mut self, v: Option<u32>) {
        self.u(v.map_or(0, |v| u64::from(v) + 1));
    }

    fn text(&mut self, s: &str) {
        self.u(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }

    /// A byte saying which are present, then those.
    fn numbers(&mut self, values: &[Option<f64>]) {
        let present = values
            .iter()
            .enumerate()
            .fold(0u8, |bits, (i, v)| bits | u8::from(v.is_some()) << i);
        self.byte(present);
        for v in values.iter().flatten() {
            self.0.extend_from_slice(&v.to_bits().to_le_bytes());
        }
    }
}

/// Bytes being read; every read checked.
struct In<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> In<'a> {
    fn byte(&mut self) -> Result<u8, Corrupt> {
        let b = *self.bytes.get(self.at).ok_or(Corrupt)?;
        self.at += 1;
        Ok(b)
    }

    fn u(&mut self) -> Result<u64, Corrupt> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(Corrupt)
    }

    fn i(&mut self) -> Result<i64, Corrupt> {
        let u = self.u()?;
        Ok((u >> 1) as i64 ^ -((u & 1) as i64))
    }

    /// An index below `limit`, or none.
    fn opt(&mut self, limit: usize) -> Result<Option<u32>, Corrupt> {
        match self.u()? {
            0 => Ok(None),
            v => Ok(Some(Self::index(v - 1, limit)?)),
        }
    }

    fn index(v: u64, limit: usize) -> Result<u32, Corrupt> {
        if v < limit as u64 {
            u32::try_from(v).map_err(|_| Corrupt)
        } else {
            Err(Corrupt)
        }
    }

    /// A count of things of at least one byte each: no more than the bytes left.
    fn count(&mut self) -> Result<usize, Corrupt> {
        let n = self.u()?;
        if n > (self.bytes.len() - self.at) as u64 {
            return Err(Corrupt);
        }
        Ok(n as usize)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Corrupt> {
        let end = self.at.checked_add(n).ok_or(Corrupt)?;
        let b = self.bytes.get(self.at..end).ok_or(Corrupt)?;
        self.at = end;
        Ok(b)
    }

    fn text(&mut self) -> Result<&'a str, Corrupt> {
        let n = self.count()?;
        std::str::from_utf8(self.take(n)?).map_err(|_| Corrupt)
    }

    fn f64(&mut self) -> Result<f64, Corrupt> {
        let b: [u8; 8] = self.take(8)?.try_into().map_err(|_| Corrupt)?;
        Ok(f64::from_bits(u64::from_le_bytes(b)))
    }

    fn numbers<const N: usize>(&mut self) -> Result<[Option<f64>; N], Corrupt> {
        let present = self.byte()?;
        if u32::from(present) >> N != 0 {
            return Err(Corrupt);
        }
        let mut values = [None; N];
        for (i, v) in values.iter_mut().enumerate() {
            if present & 1 << i != 0 {
                *v = Some(self.f64()?);
            }
        }
        Ok(values)
    }

    fn done(&self) -> bool {
        self.at == self.bytes.len()
    }
}

/// One side read back from the table.
#[derive(Debug)]
pub struct DecodedSide {
    pub side: SideGraph,
    /// The golden partner of each node, on the target side (not yet checked against the golden
    /// side); `None` on the golden side.
    pub partners: Option<Vec<Option<u32>>>,
}

/// What a decoded side may hold, set before its first part is read: per row of the graph and
/// per byte of the table ([`DECODED_BYTES_PER_ROW`], [`DECODED_BYTES_PER_TABLE_BYTE`]). Every
/// allocation the decoder makes is charged to it first; past it the side is [`Corrupt`].
#[derive(Debug, Clone, Copy)]
pub struct DecodeBudget {
    left: u64,
    /// The table's bytes for this side (all its parts).
    table_bytes: u64,
}

impl DecodeBudget {
    /// The budget of a side of `rows` rows whose parts hold `table_bytes` in all.
    pub fn new(rows: usize, table_bytes: u64) -> DecodeBudget {
        DecodeBudget {
            left: (rows as u64)
                .saturating_mul(DECODED_BYTES_PER_ROW)
                .saturating_add(table_bytes.saturating_mul(DECODED_BYTES_PER_TABLE_BYTE)),
            table_bytes,
        }
    }

    fn charge(&mut self, bytes: u64) -> Result<(), Corrupt> {
        self.left = self.left.checked_sub(bytes).ok_or(Corrupt)?;
        Ok(())
    }
}

/// Bytes of a heap text of `len` bytes (the allocator's header and rounding, about).
fn heap_text(len: usize) -> u64 {
    len as u64 + 16
}

/// One side read back from its parts, given one at a time in part order.
pub struct SideDecoder {
    side: SideGraph,
    /// Each node's entries while it is read.
    entries: Vec<Entry>,
    /// The rows the side has: part 0 must say as many nodes.
    rows: usize,
    /// The entries part 0 says the side has.
    declared_entries: usize,
    budget: DecodeBudget,
    /// Whether part 0 was read.
    started: bool,
    root: Option<u32>,
    torch: Option<bool>,
    partners: Option<Vec<Option<u32>>>,
    next_part: i64,
}

impl SideDecoder {
    /// A decoder of a side of `rows` rows, within `budget`.
    pub fn new(rows: usize, budget: DecodeBudget) -> SideDecoder {
        SideDecoder {
            side: SideGraph::default(),
            entries: Vec::new(),
            rows,
            declared_entries: 0,
            budget,
            started: false,
            root: None,
            torch: None,
            partners: None,
            next_part: 0,
        }
    }

    /// Reads part `part` (they must come in order, from 0).
    pub fn push(&mut self, part: i64, bytes: &[u8]) -> Result<(), Corrupt> {
        if part != self.next_part {
            return Err(Corrupt);
        }
        self.next_part += 1;
        let mut r = In { bytes, at: 0 };
        let n = self.rows;
        if !self.started {
            if r.u()? != VERSION || r.u()? != n as u64 || n > u32::MAX as usize {
                return Err(Corrupt);
            }
            let entries = r.u()?;
            if entries > self.budget.table_bytes / MIN_ENTRY_BYTES {
                return Err(Corrupt);
            }
            self.declared_entries = usize::try_from(entries).map_err(|_| Corrupt)?;
            self.root = r.opt(n)?;
            self.torch = match r.byte()? {
                0 => None,
                1 => Some(false),
                2 => Some(true),
                _ => return Err(Corrupt),
            };
            self.partners = match r.byte()? {
                0 => None,
                1 => Some(Vec::with_capacity(n)),
                _ => return Err(Corrupt),
            };
            // Sized once: as many nodes as the graph has rows, as many entries as part 0 says
            // (no more than the table's bytes can hold).
            self.budget.charge(
                (self.declared_entries * std::mem::size_of::<Entry>()) as u64
                    + (n * std::mem::size_of::<Node>()) as u64,
            )?;
            self.side = SideGraph::with_capacity(n);
            self.side.reserve_entries(self.declared_entries);
            self.started = true;
        } else {
            // At least one node, at most NODES_PER_PART, and no more than the side has.
            let mut names: Vec<EntryName> = Vec::new();
            let mut read = 0;
            while read == 0 || (!r.done() && read < NODES_PER_PART) {
                if self.side.nodes.len() == n {
                    return Err(Corrupt);
                }
                self.node(&mut r, n, &mut names)?;
                read += 1;
            }
        }
        if r.done() {
            Ok(())
        } else {
            Err(Corrupt)
        }
    }

    fn node(
        &mut self,
        r: &mut In<'_>,
        n: usize,
        names: &mut Vec<EntryName>,
    ) -> Result<(), Corrupt> {
        let name = r.text()?;
        // The name's share of the side's names and index (the node itself was charged at part 0).
        self.budget.charge(2 * name.len() as u64)?;
        let parent = r.opt(n)?;
        let node_type = i32::try_from(r.i()?).map_err(|_| Corrupt)?;
        let micro_step = r.i()?;
        let flags = r.byte()?;
        let direction = match flags & 3 {
            0 => Direction::Forward,
            1 => Direction::Backward,
            2 => Direction::Update,
            _ => return Err(Corrupt),
        };
        if flags >> 3 != 0 {
            return Err(Corrupt);
        }
        // Vectors sized exactly (collecting `Result`s starts a vector at four elements: an
        // entry's 88 bytes four times over, for millions of one-entry lists).
        let count = r.count()?;
        self.budget
            .charge((count * std::mem::size_of::<u32>()) as u64)?;
        let mut children = Vec::with_capacity(count);
        for _ in 0..count {
            children.push(In::index(r.u()?, n)?);
        }
        let count = r.count()?;
        self.budget
            .charge((count * std::mem::size_of::<(i64, Box<str>)>()) as u64)?;
        let mut peers = Vec::with_capacity(count);
        for _ in 0..count {
            let rank = r.i()?;
            let name = r.text()?;
            self.budget.charge(heap_text(name.len()))?;
            peers.push((rank, name.into()));
        }
        let peers = peers.into();
        if let Some(partners) = &mut self.partners {
            // Checked against the golden side once it is read.
            partners.push(r.opt(u32::MAX as usize)?);
        }
        // Inputs then outputs, into the side's entries (no more than part 0 said: their
        // memory was charged then).
        let declared = self.declared_entries;
        let before = self.side.all_entries().len();
        let budget = &mut self.budget;
        let mut read_entries = |entries: &mut Vec<Entry>| -> Result<usize, Corrupt> {
            let count = r.count()?;
            if before + entries.len() + count > declared {
                return Err(Corrupt);
            }
            for _ in 0..count {
                entries.push(entry(r, names, budget)?);
            }
            Ok(count)
        };
        self.entries.clear();
        let inputs = read_entries(&mut self.entries)?;
        read_entries(&mut self.entries)?;
        let mut node = Node::new(node_type, direction, flags & 4 != 0, micro_step);
        node.parent = parent;
        node.children = children.into();
        node.peers = peers;
        self.side
            .push(name, node, self.entries.drain(..), inputs)
            .map_err(|_| Corrupt)?;
        Ok(())
    }

    /// The side, once every part was read, and the partners it carries (the target side's,
    /// not yet checked against the golden side).
    pub fn finish(self) -> Result<DecodedSide, Corrupt> {
        if !self.started
            || self.rows != self.side.nodes.len()
            || self.declared_entries != self.side.all_entries().len()
        {
            return Err(Corrupt);
        }
        let mut side = self.side;
        side.index_names();
        side.root = self.root;
        side.torch = self.torch;
        Ok(DecodedSide {
            side,
            partners: self.partners,
        })
    }
}

fn entry(
    r: &mut In<'_>,
    names: &mut Vec<EntryName>,
    budget: &mut DecodeBudget,
) -> Result<Entry, Corrupt> {
    let name: EntryName = match r.u()? {
        0 => {
            let text = r.text()?;
            budget.charge(heap_text(text.len()) + std::mem::size_of::<EntryName>() as u64)?;
            let name = shared_name(text);
            names.push(name.clone());
            name
        }
        i => names
            .get(usize::try_from(i - 1).map_err(|_| Corrupt)?)
            .ok_or(Corrupt)?
            .clone(),
    };
    let flags = r.byte()?;
    let role = match flags & 3 {
        0 => Role::Input,
        1 => Role::Parameter,
        2 => Role::Output,
        _ => return Err(Corrupt),
    };
    let kind = match flags >> 2 & 3 {
        0 => Kind::Tensor,
        1 => Kind::Scalar,
        2 => Kind::Ignored,
        _ => return Err(Corrupt),
    };
    let dtype = *DTYPES.get(usize::from(r.byte()?)).ok_or(Corrupt)?;
    let [max, min, mean, norm] = r.numbers::<4>()?;
    let mut text = |r: &mut In<'_>| -> Result<Text, Corrupt> {
        let t = r.text()?;
        budget.charge(heap_text(t.len()))?;
        Ok(t.into())
    };
    let value = if flags & 1 << 5 != 0 {
        Some(text(r)?)
    } else {
        None
    };
    let md5 = if flags & 1 << 6 != 0 {
        Some(text(r)?)
    } else {
        None
    };
    let metrics = if flags & 1 << 7 != 0 {
        let [cosine, max_abs_err] = r.numbers::<2>()?;
        Some(TensorMetrics {
            cosine,
            max_abs_err,
        })
    } else {
        None
    };
    let shape = u64::from_le_bytes(r.take(8)?.try_into().map_err(|_| Corrupt)?);
    Ok(Entry::new(
        &name,
        role,
        kind,
        dtype,
        flags & 1 << 4 != 0,
        Stats::new(max, min, mean, norm),
        shape,
        Extra::new(value, md5, metrics),
    ))
}

/// Reads one side from the table; `None` when its parts do not decode, are too big, would
/// decode past their budget, or do not match the rows (another number of nodes than the graph
/// has rows).
pub(crate) fn read_side(
    store: &Store,
    graph: GraphKey,
) -> Result<Option<DecodedSide>, DiagnoseError> {
    let rows = store.count_graph_rows(graph)?;
    let (_, table_bytes) = store.diagnosis_parts_size(graph)?;
    let mut decoder = SideDecoder::new(rows, DecodeBudget::new(rows, table_bytes));
    let mut corrupt = false;
    store.scan_diagnosis_parts(graph, |part, data| -> Result<(), DiagnoseError> {
        if corrupt {
            return Ok(());
        }
        corrupt = match data {
            DiagnosisPart::Bytes(bytes) => decoder.push(part, bytes).is_err(),
            DiagnosisPart::TooLarge(_) => true,
        };
        Ok(())
    })?;
    if corrupt {
        return Ok(None);
    }
    Ok(decoder.finish().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::parse_entries_text;

    /// A side of three nodes with every kind of field set somewhere.
    fn side() -> SideGraph {
        let node = |parent, children: Vec<u32>| {
            let mut node = Node::new(1, Direction::Forward, false, 0);
            node.parent = parent;
            node.children = children.into();
            node
        };
        let inputs = parse_entries_text(
            "a.forward",
            r#"{"a.forward.input.0": {"type": "torch.Tensor", "dtype": "torch.bfloat16",
                "shape": "[2]", "Max": "nan", "Min": "-inf", "Norm": "2.5", "Cosine": "0.9"},
                "a.forward.input.eps": {"type": "float", "value": "1e-05"},
                "a.forward.parameters.weight": {"type": "torch.Tensor", "md5": "00ab",
                "shape": "[2]", "Max": "1"}}"#,
            false,
        )
        .expect("entries");
        let mut outputs = inputs.clone();
        outputs[1] = outputs[1].with_extra(Extra::new(Some(Text::from("ä")), None, None));
        let mut last = node(Some(0), vec![]);
        last.direction = Direction::Update;
        last.param_grad = true;
        last.micro_step = -3;
        last.node_type = 9;
        last.peers = vec![(7, "Distributed.recv.0.forward".into())].into();
        let mut side = SideGraph::with_capacity(3);
        let count = inputs.len();
        side.push("root", node(None, vec![1, 2]), [], 0)
            .expect("small");
        side.push("a.forward", node(Some(0), vec![]), inputs, count)
            .expect("small");
        side.push("b.backward", last, outputs, 0).expect("small");
        side.index_names();
        side.root = Some(0);
        side.torch = Some(true);
        side
    }

    fn decode(rows: usize, parts: &[Vec<u8>]) -> Result<DecodedSide, Corrupt> {
        let bytes = parts.iter().map(|p| p.len() as u64).sum();
        let mut d = SideDecoder::new(rows, DecodeBudget::new(rows, bytes));
        for (i, p) in parts.iter().enumerate() {
            d.push(i as i64, p)?;
        }
        d.finish()
    }

    #[test]
    fn a_side_reads_back_as_it_was_written() {
        let side = side();
        let partners = [Some(2), None, Some(0)];
        let parts = encode_side(&side, Some(&partners)).expect("fits");
        let DecodedSide {
            side: back,
            partners: back_partners,
        } = decode(3, &parts).expect("decodes");
        let shown = |g: &SideGraph| {
            let nodes: Vec<_> = g.iter().collect();
            format!("{nodes:?} {:?} {:?}", g.root, g.torch)
        };
        assert_eq!(shown(&back), shown(&side));
        assert_eq!(back_partners.as_deref(), Some(&partners[..]));
        assert_eq!(back.find("b.backward"), Some(2));
        // The golden side carries no partners.
        let golden = decode(3, &encode_side(&side, None).expect("fits")).expect("decodes");
        assert_eq!(golden.partners, None);
    }

    #[test]
    fn parts_split_at_the_part_size() {
        let mut side = side();
        let (extra, inputs) = (side.nodes[1].clone(), side.inputs(1).to_vec());
        for _ in 0..NODES_PER_PART + 5 {
            let count = inputs.len();
            side.push("a.forward", extra.clone(), inputs.clone(), count)
                .expect("small");
        }
        let parts = encode_side(&side, None).expect("fits");
        assert_eq!(parts.len(), 3);
        let n = side.nodes.len();
        assert_eq!(decode(n, &parts).expect("decodes").side.nodes.len(), n);
        // Parts out of order, or one missing, do not decode.
        assert!(decode(n, &[parts[0].clone(), parts[2].clone()]).is_err());
    }

    #[test]
    fn what_does_not_fit_the_rows_or_the_form_does_not_decode() {
        let side = side();
        let parts = encode_side(&side, Some(&[None, None, None])).expect("fits");
        // Another number of rows than the side has nodes.
        assert!(decode(4, &parts).is_err());
        assert!(decode(2, &parts).is_err());
        // Another version.
        let mut other = parts.clone();
        other[0][0] = VERSION as u8 + 1;
        assert!(decode(3, &other).is_err());
        // Every cut of a part, and a byte more.
        for cut in 0..parts[1].len() {
            let mut short = parts.clone();
            short[1].truncate(cut);
            assert!(decode(3, &short).is_err(), "cut at {cut}");
        }
        let mut long = parts.clone();
        long[1].push(0);
        assert!(decode(3, &long).is_err());
        // A child past the nodes: the root's first child is its name's length + 4 bytes in.
        let mut bad = parts.clone();
        let at = 1 + "root".len() + 1 + 1 + 1 + 1 + 1;
        assert_eq!(bad[1][at], 1, "the root's first child");
        bad[1][at] = 3;
        assert!(decode(3, &bad).is_err());
        // Any byte changed either decodes or is refused, never panics.
        for i in 0..parts[1].len() {
            for b in [0u8, 0x7f, 0x80, 0xff] {
                let mut changed = parts.clone();
                changed[1][i] = b;
                let _ = decode(3, &changed);
            }
        }
    }

    #[test]
    fn a_part_is_cut_by_its_bytes_and_a_node_too_big_for_one_is_not_written() {
        let mut side = side();
        // A node of many entries: about 40 bytes each, a few hundred KB in all.
        let one = side.inputs(1)[0].clone();
        let many: Vec<Entry> = (0..20_000).map(|_| one.clone()).collect();
        for _ in 0..20 {
            let node = side.nodes[1].clone();
            side.push("wide.forward", node, many.clone(), many.len())
                .expect("small");
        }
        let parts = encode_side(&side, None).expect("fits");
        assert!(parts.len() > 2, "{} parts", parts.len());
        assert!(parts
            .iter()
            .all(|p| p.len() <= PART_TARGET_BYTES + MAX_DIAGNOSIS_PART_BYTES / 2));
        let n = side.nodes.len();
        assert_eq!(decode(n, &parts).expect("decodes").side.nodes.len(), n);
        // One node past what a part may hold.
        let huge: Vec<Entry> = (0..MAX_DIAGNOSIS_PART_BYTES / 12)
            .map(|_| one.clone())
            .collect();
        let node = side.nodes[1].clone();
        side.push("huge.forward", node, huge, 0).expect("small");
        assert!(encode_side(&side, None).is_none());
    }

    #[test]
    fn a_side_that_would_decode_past_its_budget_is_refused_before_it_is_held() {
        let side = side();
        let parts = encode_side(&side, None).expect("fits");
        let bytes: u64 = parts.iter().map(|p| p.len() as u64).sum();
        let decode_with = |budget| {
            let mut d = SideDecoder::new(3, budget);
            for (i, p) in parts.iter().enumerate() {
                d.push(i as i64, p)?;
            }
            d.finish()
        };
        assert!(decode_with(DecodeBudget::new(3, bytes)).is_ok());
        // A budget a byte short of what the side holds.
        let mut tight = DecodeBudget::new(3, bytes);
        tight.left = 0;
        assert!(decode_with(tight).is_err());
        // Part 0 saying more entries than the table's bytes can hold is refused at once.
        let mut head = Out::default();
        head.u(VERSION);
        head.u(3);
        head.u(bytes / MIN_ENTRY_BYTES + 1);
        let mut d = SideDecoder::new(3, DecodeBudget::new(3, bytes));
        assert!(d.push(0, &head.0).is_err());
        // And fewer entries than the nodes hold.
        let mut fewer = parts.clone();
        fewer[0][2] -= 1;
        assert!(decode(3, &fewer).is_err());
    }
}
