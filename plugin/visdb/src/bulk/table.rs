//! Table b-trees, bulk-loaded in rowid order.
//!
//! Rows fill one leaf page at a time; a full leaf is appended to the file at once, so memory
//! holds a single page per table. Payload beyond the leaf's share spills to an overflow chain that
//! is written before the leaf itself. When the last row is in, the interior levels are built from
//! the leaves' (page, largest rowid) list: an interior cell is (left child, largest rowid in it).

use std::io;

use super::file::PageFile;
use super::format::{
    encode_record, put_varint, record_len, varint_len, write_record, CellArea, Geometry, Value,
    TABLE_INTERIOR, TABLE_LEAF,
};
use super::pack::group_children;

/// A child page and the largest rowid under it.
type Child = (u32, i64);

/// One table being loaded.
pub struct TableTree {
    geo: Geometry,
    page: Vec<u8>,
    area: CellArea,
    leaves: Vec<Child>,
    rows: i64,
}

impl TableTree {
    pub fn new(geo: Geometry) -> TableTree {
        TableTree {
            geo,
            page: vec![0; geo.page_size],
            area: CellArea::new(TABLE_LEAF, 0, geo.page_size),
            leaves: Vec::new(),
            rows: 0,
        }
    }

    /// Rows appended so far (the last rowid).
    pub fn rows(&self) -> i64 {
        self.rows
    }

    /// Appends the row of `values` (rowid = rows + 1), serialized straight into the leaf page
    /// unless it spills.
    pub fn append_values(&mut self, values: &[Value<'_>], file: &mut PageFile) -> io::Result<()> {
        let (payload, header) = record_len(values);
        if self.geo.table_local(payload) < payload {
            let mut record = Vec::with_capacity(payload);
            encode_record(values, &mut record);
            return self.append(&record, file);
        }
        let rowid = self.rows + 1;
        let len = varint_len(payload as u64) + varint_len(rowid as u64) + payload;
        if !self.area.fits(len) {
            self.flush_leaf(file)?;
        }
        let cell = self.area.push(&mut self.page, len);
        let mut at = put_varint(cell, payload as u64);
        at += put_varint(&mut cell[at..], rowid as u64);
        write_record(values, header, &mut cell[at..]);
        self.rows = rowid;
        Ok(())
    }

    /// Appends `record` as the next row (rowid = rows + 1).
    pub fn append(&mut self, record: &[u8], file: &mut PageFile) -> io::Result<()> {
        let rowid = self.rows + 1;
        let payload = record.len();
        let local = self.geo.table_local(payload);
        let spills = local < payload;
        let len = varint_len(payload as u64)
            + varint_len(rowid as u64)
            + local
            + if spills { 4 } else { 0 };
        if !self.area.fits(len) {
            self.flush_leaf(file)?;
        }
        let overflow = if spills {
            write_overflow(&record[local..], self.geo, file)?
        } else {
            0
        };
        let cell = self.area.push(&mut self.page, len);
        let mut at = put_varint(cell, payload as u64);
        at += put_varint(&mut cell[at..], rowid as u64);
        cell[at..at + local].copy_from_slice(&record[..local]);
        if spills {
            cell[at + local..].copy_from_slice(&overflow.to_be_bytes());
        }
        self.rows = rowid;
        Ok(())
    }

    fn flush_leaf(&mut self, file: &mut PageFile) -> io::Result<()> {
        self.area.finish(&mut self.page, 0);
        let page = file.append(&self.page)?;
        self.leaves.push((page, self.rows));
        self.area = CellArea::new(TABLE_LEAF, 0, self.geo.page_size);
        Ok(())
    }

    /// Writes the last leaf and the interior levels; returns the root page.
    pub fn finish(mut self, file: &mut PageFile) -> io::Result<u32> {
        if self.area.cells() > 0 || self.leaves.is_empty() {
            self.flush_leaf(file)?;
        }
        let mut level = std::mem::take(&mut self.leaves);
        while level.len() > 1 {
            level = self.interior_level(&level, file)?;
        }
        Ok(level.first().map_or(0, |c| c.0))
    }

    /// Writes the interior pages above `children`; returns them as the next level's children.
    fn interior_level(
        &mut self,
        children: &[Child],
        file: &mut PageFile,
    ) -> io::Result<Vec<Child>> {
        let sizes: Vec<usize> = children[..children.len() - 1]
            .iter()
            .map(|&(_, key)| 4 + varint_len(key as u64))
            .collect();
        let groups = group_children(&sizes, self.geo.page_size - 12);
        let mut parents = Vec::with_capacity(groups.len());
        for (a, b) in groups {
            let mut area = CellArea::new(TABLE_INTERIOR, 0, self.geo.page_size);
            for &(child, key) in &children[a..b] {
                let cell = area.push(&mut self.page, 4 + varint_len(key as u64));
                cell[..4].copy_from_slice(&child.to_be_bytes());
                put_varint(&mut cell[4..], key as u64);
            }
            let (right, max_key) = children[b];
            area.finish(&mut self.page, right);
            parents.push((file.append(&self.page)?, max_key));
        }
        Ok(parents)
    }
}

/// Writes `rest` as a chain of overflow pages; returns the first page.
pub(super) fn write_overflow(rest: &[u8], geo: Geometry, file: &mut PageFile) -> io::Result<u32> {
    let first = file.next_page();
    let chunks = rest.chunks(geo.overflow_chunk());
    let count = chunks.len();
    let mut page = vec![0u8; geo.page_size];
    for (i, chunk) in chunks.enumerate() {
        let next = if i + 1 < count {
            geo.page_at(first, i as u32 + 1)
        } else {
            0
        };
        page[..4].copy_from_slice(&next.to_be_bytes());
        page[4..4 + chunk.len()].copy_from_slice(chunk);
        page[4 + chunk.len()..].fill(0);
        file.append(&page)?;
    }
    Ok(first)
}

/// A table that must fit on one leaf page at header offset `hdr` (page 1's `sqlite_schema`).
/// Returns `None` when it does not fit.
pub fn single_leaf(records: &[Vec<u8>], geo: Geometry, hdr: usize) -> Option<Vec<u8>> {
    let mut page = vec![0u8; geo.page_size];
    let mut area = CellArea::new(TABLE_LEAF, hdr, geo.page_size);
    for (i, record) in records.iter().enumerate() {
        let rowid = i as u64 + 1;
        let payload = record.len();
        let len = varint_len(payload as u64) + varint_len(rowid) + payload;
        if geo.table_local(payload) < payload || !area.fits(len) {
            return None;
        }
        let cell = area.push(&mut page, len);
        let mut at = put_varint(cell, payload as u64);
        at += put_varint(&mut cell[at..], rowid);
        cell[at..].copy_from_slice(record);
    }
    area.finish(&mut page, 0);
    Some(page)
}
