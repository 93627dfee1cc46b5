//! Index b-trees, built from entries sorted in memory.
//!
//! An index record is (indexed columns…, rowid), in SQLite's record order. Unlike a table, an
//! index interior cell holds a real entry (the one between its left child and the next), which is
//! not repeated in any leaf. Building takes four steps, so that indexes are built side by side
//! and pages rendered in parallel:
//! 1. [`IndexRows::push`], as rows arrive: a sort key whose plain byte order is SQLite's order of
//!    the indexed values ([`push_sort_key`]);
//! 2. [`sorted_records`]: sort by (key, rowid), check uniqueness, write the records from the keys;
//! 3. [`plan`]: cut them into pages bottom-up, numbering pages from 0 (page count known);
//! 4. [`render`]: write the pages, once the index's first page number in the file is known.

use std::ops::Range;

use rayon::prelude::*;

use super::format::{
    decode_sort_key, encode_record, key_record, push_sort_key, put_varint, sort_key_text,
    varint_len, CellArea, Decoded, Geometry, Value, INDEX_INTERIOR, INDEX_LEAF,
};
use super::pack::{group_children, group_leaves};

/// Byte strings back to back.
#[derive(Debug, Default)]
pub struct Records {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Records {
    pub fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Appends one string, written by `write` at the end of the buffer.
    pub fn push_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        write(&mut self.bytes);
        self.ends.push(self.bytes.len());
    }

    /// Appends the string `write` writes, if it says it did (`true`); nothing otherwise.
    pub fn push_with_ok(&mut self, write: impl FnOnce(&mut Vec<u8>) -> bool) -> bool {
        let start = self.bytes.len();
        if write(&mut self.bytes) {
            self.ends.push(self.bytes.len());
            true
        } else {
            self.bytes.truncate(start);
            false
        }
    }
}

/// One index's entries for consecutive rows, in rowid order: only the memcmp-ordered sort key of
/// the indexed columns ([`push_sort_key`]), which is also all that is needed to write the entry's
/// record again after sorting ([`decode_sort_key`]); the rowid of entry `i` is `base + i + 1`
/// (`base` grows when the entries so far are spilled, see [`super::spill`]). Keeping one form
/// instead of key and record halves the writer's memory.
#[derive(Debug, Default)]
pub struct IndexRows {
    keys: Records,
    /// Per entry, a bit per column stored as REAL (empty while there is none: numbers in a sort
    /// key do not say whether they were INTEGER or REAL).
    reals: Vec<u64>,
    /// Rows before the first entry held.
    base: i64,
}

impl IndexRows {
    /// Adds the entry (indexed values…, rowid) of one row; its rowid must follow the last one.
    pub fn push(&mut self, entry: &[Value<'_>]) {
        let key = &entry[..entry.len().saturating_sub(1)];
        debug_assert!(
            matches!(entry.last(), Some(Value::Int(r)) if *r == self.base + self.keys.len() as i64 + 1),
            "index entries arrive in rowid order"
        );
        self.keys
            .push_with(|out| key.iter().for_each(|v| push_sort_key(v, out)));
        let mask = reals_mask(key);
        if mask != 0 && self.reals.is_empty() {
            self.reals = vec![0; self.keys.len() - 1];
        }
        if mask != 0 || !self.reals.is_empty() {
            self.reals.push(mask);
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Bytes the entries take (their keys, ends and REAL masks).
    pub fn bytes(&self) -> usize {
        self.keys.bytes.len() + (self.keys.ends.len() + self.reals.len()) * 8
    }

    /// The entries as (key, REAL mask, rowid), in SQLite's order: by key, then rowid.
    pub fn sorted(&self) -> Vec<(&[u8], u64, i64)> {
        let mut order: Vec<(&[u8], u64, i64)> = (self.keys.iter().enumerate())
            .map(|(i, key)| {
                let reals = self.reals.get(i).copied().unwrap_or(0);
                (key, reals, self.base + i as i64 + 1)
            })
            .collect();
        // Rowids are distinct: the order is total.
        order.par_sort_unstable_by(|a, b| a.0.cmp(b.0).then(a.2.cmp(&b.2)));
        order
    }

    /// Drops the entries held (their room is kept); the next one is that of the row after them.
    pub fn clear(&mut self) {
        self.base += self.keys.len() as i64;
        self.keys.bytes.clear();
        self.keys.ends.clear();
        self.reals.clear();
    }
}

/// A bit per value of `values` stored as REAL (bit `i` for value `i`, the first 64): what a
/// sort key does not say ([`IndexRows`]' `reals`).
pub fn reals_mask(values: &[Value<'_>]) -> u64 {
    values
        .iter()
        .take(64)
        .enumerate()
        .filter(|(_, v)| matches!(v, Value::Real(_)))
        .fold(0u64, |m, (i, _)| m | 1 << i)
}

/// Appends the index record (key's values…, `rowid`) of a key made by [`push_sort_key`];
/// `false` if the key cannot be read back (keys are only ever made by `push_sort_key`: a bug).
pub fn entry_record(key: &[u8], reals: u64, rowid: i64, out: &mut Vec<u8>) -> bool {
    let start = out.len();
    if key_record(key, reals, rowid, out) {
        return true;
    }
    out.truncate(start);
    // Not a key `key_record` reads (too many columns): decode, then encode.
    let mut values = Vec::new();
    if !decode_sort_key(key, reals, &mut values) {
        return false;
    }
    let entry: Vec<Value<'_>> = values
        .iter()
        .map(Decoded::value)
        .chain([Value::Int(rowid)])
        .collect();
    encode_record(&entry, out);
    true
}

/// Why an index could not be sorted: a UNIQUE index got two equal keys (the first column of the
/// key, as text), or a key could not be read back.
#[derive(Debug)]
pub enum SortError {
    Duplicate(String),
    /// A key that `push_sort_key` did not make (a bug, not bad input).
    BadKey,
}

/// The index records in SQLite's order: by key, then rowid. A UNIQUE index fails on equal keys.
/// Consumes the entries, so that their memory goes as the records come.
pub fn sorted_records(rows: IndexRows, unique: bool) -> Result<Records, SortError> {
    let order = rows.sorted();
    if unique {
        if let Some(w) = order.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(SortError::Duplicate(sort_key_text(w[0].0)));
        }
    }
    let mut records = Records::default();
    records.ends.reserve(order.len());
    // A record is at most its key (a text loses 3 bytes, a number 2) plus the rowid and a header
    // byte per column: sized once, the buffer is never copied as it grows.
    records
        .bytes
        .reserve(rows.keys.bytes.len() + order.len() * RECORD_SLACK);
    for (key, reals, rowid) in order {
        if !records.push_with_ok(|out| entry_record(key, reals, rowid, out)) {
            return Err(SortError::BadKey);
        }
    }
    Ok(records)
}

/// Bytes a record may need beyond its key: the rowid (9) and header bytes.
const RECORD_SLACK: usize = 24;

/// One page of a planned index.
enum PlanPage {
    Leaf(Range<usize>),
    /// Cells (left child, entry) and the right-most child.
    Interior {
        cells: Vec<(u32, usize)>,
        right: u32,
    },
    /// Part `chunk` of the overflow chain of `entry`.
    Overflow {
        entry: usize,
        chunk: usize,
    },
}

/// An index cut into pages numbered from 0.
pub struct Plan {
    records: Records,
    pages: Vec<PlanPage>,
    /// First overflow page of each entry (`NO_OVERFLOW` if it fits on its page).
    overflow: Vec<u32>,
    root: u32,
}

const NO_OVERFLOW: u32 = u32::MAX;

impl Plan {
    /// The root, counted from the index's first page.
    pub fn root(&self) -> u32 {
        self.root
    }
}

/// Cuts `records` into leaves and interior levels.
pub fn plan(records: Records, geo: Geometry) -> Plan {
    let mut p = Planner {
        geo,
        pages: Vec::new(),
        overflow: vec![NO_OVERFLOW; records.len()],
        records: &records,
    };
    let (mut children, mut dividers) = p.leaves();
    while children.len() > 1 {
        (children, dividers) = p.interior_level(&children, &dividers);
    }
    let root = children.first().copied().unwrap_or(0);
    let (pages, overflow) = (p.pages, p.overflow);
    Plan {
        records,
        pages,
        overflow,
        root,
    }
}

struct Planner<'r> {
    geo: Geometry,
    records: &'r Records,
    pages: Vec<PlanPage>,
    overflow: Vec<u32>,
}

impl Planner<'_> {
    fn add(&mut self, page: PlanPage) -> u32 {
        self.pages.push(page);
        (self.pages.len() - 1) as u32
    }

    /// Length of `entry`'s cell on a leaf (an interior cell adds its 4-byte child pointer).
    fn cell_len(&self, entry: usize) -> usize {
        let payload = self.records.get(entry).len();
        let local = self.geo.index_local(payload);
        varint_len(payload as u64) + local + if local < payload { 4 } else { 0 }
    }

    /// Gives `entry` its overflow pages, if it spills.
    fn place(&mut self, entry: usize) {
        let payload = self.records.get(entry).len();
        let local = self.geo.index_local(payload);
        if local < payload {
            self.overflow[entry] = self.pages.len() as u32;
            for chunk in 0..self.geo.overflow_pages(payload, local) {
                self.add(PlanPage::Overflow { entry, chunk });
            }
        }
    }

    /// The leaves, and the entries dividing them.
    fn leaves(&mut self) -> (Vec<u32>, Vec<usize>) {
        let sizes: Vec<usize> = (0..self.records.len()).map(|e| self.cell_len(e)).collect();
        let ranges = group_leaves(&sizes, self.geo.page_size - 8);
        let dividers = ranges[..ranges.len() - 1].iter().map(|r| r.end).collect();
        let mut children = Vec::with_capacity(ranges.len());
        for r in ranges {
            children.push(self.add(PlanPage::Leaf(r.clone())));
            r.for_each(|e| self.place(e));
        }
        (children, dividers)
    }

    /// The interior pages above `children` (divided by `dividers`), with their own dividers.
    fn interior_level(&mut self, children: &[u32], dividers: &[usize]) -> (Vec<u32>, Vec<usize>) {
        let sizes: Vec<usize> = dividers.iter().map(|&e| 4 + self.cell_len(e)).collect();
        let groups = group_children(&sizes, self.geo.page_size - 12);
        let mut parents = Vec::with_capacity(groups.len());
        let mut up = Vec::with_capacity(groups.len().saturating_sub(1));
        for (a, b) in groups {
            let cells: Vec<(u32, usize)> = (a..b).map(|i| (children[i], dividers[i])).collect();
            parents.push(self.add(PlanPage::Interior {
                cells,
                right: children[b],
            }));
            (a..b).for_each(|i| self.place(dividers[i]));
            if let Some(&d) = dividers.get(b) {
                up.push(d);
            }
        }
        (parents, up)
    }
}

/// The index's pages, numbered from `base` in the file.
pub fn render(plan: &Plan, geo: Geometry, base: u32) -> Vec<u8> {
    let r = Renderer { plan, geo, base };
    let mut out = vec![0u8; plan.pages.len() * geo.page_size];
    out.par_chunks_mut(geo.page_size)
        .zip(plan.pages.par_iter())
        .for_each(|(slot, page)| r.page(page, slot));
    out
}

/// Writes planned pages with their final page numbers (`base` + planned number).
struct Renderer<'p> {
    plan: &'p Plan,
    geo: Geometry,
    base: u32,
}

impl Renderer<'_> {
    fn page(&self, page: &PlanPage, slot: &mut [u8]) {
        match page {
            PlanPage::Leaf(entries) => {
                let mut area = CellArea::new(INDEX_LEAF, 0, self.geo.page_size);
                for e in entries.clone() {
                    self.entry(e, None, &mut area, slot);
                }
                area.finish(slot, 0);
            }
            PlanPage::Interior { cells, right } => {
                let mut area = CellArea::new(INDEX_INTERIOR, 0, self.geo.page_size);
                for &(child, e) in cells {
                    self.entry(e, Some(self.geo.page_at(self.base, child)), &mut area, slot);
                }
                area.finish(slot, self.geo.page_at(self.base, *right));
            }
            PlanPage::Overflow { entry, chunk } => self.overflow(*entry, *chunk, slot),
        }
    }

    /// Writes the cell of entry `e`: (child,) payload size, local payload (, first overflow page).
    fn entry(&self, e: usize, child: Option<u32>, area: &mut CellArea, slot: &mut [u8]) {
        let record = self.plan.records.get(e);
        let payload = record.len();
        let local = self.geo.index_local(payload);
        let spills = local < payload;
        let len = child.map_or(0, |_| 4)
            + varint_len(payload as u64)
            + local
            + if spills { 4 } else { 0 };
        let cell = area.push(slot, len);
        let mut at = 0;
        if let Some(c) = child {
            cell[..4].copy_from_slice(&c.to_be_bytes());
            at = 4;
        }
        at += put_varint(&mut cell[at..], payload as u64);
        cell[at..at + local].copy_from_slice(&record[..local]);
        if spills {
            let first = self.geo.page_at(self.base, self.plan.overflow[e]);
            cell[at + local..].copy_from_slice(&first.to_be_bytes());
        }
    }

    /// Part `chunk` of `entry`'s overflow chain: next page (0 ends it), then payload.
    fn overflow(&self, entry: usize, chunk: usize, slot: &mut [u8]) {
        let record = self.plan.records.get(entry);
        let local = self.geo.index_local(record.len());
        let count = self.geo.overflow_pages(record.len(), local);
        let next = if chunk + 1 < count {
            self.geo
                .page_at(self.base, self.plan.overflow[entry] + chunk as u32 + 1)
        } else {
            0
        };
        let size = self.geo.overflow_chunk();
        let start = local + chunk * size;
        let part = &record[start..record.len().min(start + size)];
        slot[..4].copy_from_slice(&next.to_be_bytes());
        slot[4..4 + part.len()].copy_from_slice(part);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records come out in (key, rowid) order whichever way they are written: straight from the
    /// key, or (for keys wider than `key_record` takes) decoded and encoded again.
    #[test]
    fn sorted_records_are_the_entries_records_in_order() {
        for width in [2usize, 20] {
            let mut rows = IndexRows::default();
            let mut expected = Vec::new();
            for rowid in 1..=50i64 {
                let text = format!("name{}", (rowid * 7) % 13);
                let mut entry: Vec<Value<'_>> = vec![Value::Text(&text)];
                entry.extend((1..width).map(|c| Value::Int(rowid % 3 + c as i64)));
                entry.push(Value::Int(rowid));
                rows.push(&entry);
                let mut record = Vec::new();
                encode_record(&entry, &mut record);
                let mut key = Vec::new();
                entry[..width]
                    .iter()
                    .for_each(|v| push_sort_key(v, &mut key));
                expected.push((key, rowid, record));
            }
            expected.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
            let records = sorted_records(rows, false).unwrap_or_else(|_| panic!("width {width}"));
            let got: Vec<&[u8]> = records.iter().collect();
            let want: Vec<&[u8]> = expected.iter().map(|e| e.2.as_slice()).collect();
            assert_eq!(got, want, "width {width}");
        }
    }
}
