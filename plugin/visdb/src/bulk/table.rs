//! Table b-trees, bulk-loaded in rowid order.
//!
//! Rows fill one leaf page at a time; a full leaf is appended to the file at once, so memory
//! holds a single page per table. Payload beyond the leaf's share spills to an overflow chain that
//! is written before the leaf itself. When the last row is in, the interior levels are built from
//! the leaves' (page, largest rowid) list: an interior cell is (left child, largest rowid in it).

use std::io;

use super::file::PageFile;
use super::format::{
    put_varint, record_len, record_pieces, varint_len, write_record, CellArea, Geometry, Value,
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

    /// Appends the row of `values` (rowid = rows + 1), serialized straight into the leaf page,
    /// and its part beyond the page's share straight into its overflow pages: the record is
    /// never assembled (a row of one 128 MB value costs a page, not another 128 MB).
    pub fn append_values(&mut self, values: &[Value<'_>], file: &mut PageFile) -> io::Result<()> {
        let (payload, header) = record_len(values);
        let local = self.geo.table_local(payload);
        if local < payload {
            return self.append_cell(payload, local, file, |sink| {
                record_pieces(values, header, |piece| sink.write(piece))
            });
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
        let payload = record.len();
        let local = self.geo.table_local(payload);
        self.append_cell(payload, local, file, |sink| sink.write(record))
    }

    /// Appends the next row, a payload of `payload` bytes of which `local` stay on the leaf,
    /// which `write` hands to its [`PayloadSink`] in order: the overflow pages go to the file as
    /// they fill, before the leaf that points to them.
    fn append_cell(
        &mut self,
        payload: usize,
        local: usize,
        file: &mut PageFile,
        write: impl FnOnce(&mut PayloadSink<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        let rowid = self.rows + 1;
        let spills = local < payload;
        let len = varint_len(payload as u64)
            + varint_len(rowid as u64)
            + local
            + if spills { 4 } else { 0 };
        if !self.area.fits(len) {
            self.flush_leaf(file)?;
        }
        let mut sink = PayloadSink {
            local: Vec::with_capacity(local),
            local_len: local,
            overflow: OverflowWriter::new(payload - local, self.geo, file),
            file,
        };
        write(&mut sink)?;
        let (local_part, overflow) = sink.finish()?;
        let cell = self.area.push(&mut self.page, len);
        let mut at = put_varint(cell, payload as u64);
        at += put_varint(&mut cell[at..], rowid as u64);
        cell[at..at + local].copy_from_slice(&local_part);
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

/// Where a row's payload goes as it is made: its first `local_len` bytes to the cell, the rest
/// to its overflow chain.
struct PayloadSink<'f> {
    local: Vec<u8>,
    local_len: usize,
    overflow: OverflowWriter,
    file: &'f mut PageFile,
}

impl PayloadSink<'_> {
    fn write(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        let to_local = (self.local_len - self.local.len()).min(bytes.len());
        self.local.extend_from_slice(&bytes[..to_local]);
        bytes = &bytes[to_local..];
        if !bytes.is_empty() {
            self.overflow.write(bytes, self.file)?;
        }
        Ok(())
    }

    /// The cell's part and the first overflow page (0: none).
    fn finish(self) -> io::Result<(Vec<u8>, u32)> {
        let first = self.overflow.finish(self.file)?;
        Ok((self.local, first))
    }
}

/// An overflow chain written page by page as its bytes come: the chain's pages are appended
/// one after the other, so each knows the number of the next ([`Geometry::page_at`]).
pub(super) struct OverflowWriter {
    geo: Geometry,
    /// The first page (0 when there is nothing to write).
    first: u32,
    /// Pages the chain will have, and pages written so far.
    count: usize,
    written: usize,
    page: Vec<u8>,
    filled: usize,
}

impl OverflowWriter {
    /// A chain for `len` bytes, starting at the file's next page.
    pub(super) fn new(len: usize, geo: Geometry, file: &PageFile) -> OverflowWriter {
        let count = len.div_ceil(geo.overflow_chunk());
        OverflowWriter {
            geo,
            first: if count > 0 { file.next_page() } else { 0 },
            count,
            written: 0,
            page: if count > 0 {
                vec![0u8; geo.page_size]
            } else {
                Vec::new()
            },
            filled: 0,
        }
    }

    pub(super) fn write(&mut self, mut bytes: &[u8], file: &mut PageFile) -> io::Result<()> {
        let chunk = self.geo.overflow_chunk();
        while !bytes.is_empty() {
            if self.written == self.count {
                return Err(io::Error::other(
                    "internal: a payload longer than announced",
                ));
            }
            let take = (chunk - self.filled).min(bytes.len());
            self.page[4 + self.filled..4 + self.filled + take].copy_from_slice(&bytes[..take]);
            self.filled += take;
            bytes = &bytes[take..];
            if self.filled == chunk {
                self.emit(file)?;
            }
        }
        Ok(())
    }

    fn emit(&mut self, file: &mut PageFile) -> io::Result<()> {
        let next = if self.written + 1 < self.count {
            self.geo.page_at(self.first, self.written as u32 + 1)
        } else {
            0
        };
        self.page[..4].copy_from_slice(&next.to_be_bytes());
        self.page[4 + self.filled..].fill(0);
        file.append(&self.page)?;
        self.written += 1;
        self.filled = 0;
        Ok(())
    }

    /// Writes the last page; returns the first (0 when the chain is empty).
    pub(super) fn finish(mut self, file: &mut PageFile) -> io::Result<u32> {
        if self.filled > 0 {
            self.emit(file)?;
        }
        if self.written != self.count {
            return Err(io::Error::other(
                "internal: a payload shorter than announced",
            ));
        }
        Ok(self.first)
    }
}

/// Writes `rest` as a chain of overflow pages; returns the first page.
pub(super) fn write_overflow(rest: &[u8], geo: Geometry, file: &mut PageFile) -> io::Result<u32> {
    let mut chain = OverflowWriter::new(rest.len(), geo, file);
    chain.write(rest, file)?;
    chain.finish(file)
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
