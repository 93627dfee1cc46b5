//! Index b-trees written as their entries arrive, already sorted: memory of one page per level.
//!
//! [`super::index`] sorts every entry in memory, then cuts the sorted records into pages: its
//! memory grows with the rows. When the entries come sorted from elsewhere — the gather merges the
//! indexes of its parts, each already sorted — [`SortedIndex`] writes each page as soon as it is
//! full, and keeps only the page being filled on each level of the tree.
//!
//! The pages are cut as [`super::pack`] cuts them: a leaf or interior page takes cells greedily
//! while they fit, the entry that does not fit becomes the divider above it, and a level never
//! ends on a page without cells (the last divider moves down one place instead). That last rule
//! needs to know which entry is the last, so each level holds back the entry that did not fit
//! until the next one arrives (or [`SortedIndex::finish`] says there is none). Leaves and the
//! interior pages above them are written interleaved, in the order they fill; SQLite does not
//! care where a page of a b-tree is.

use std::io;

use super::file::PageFile;
use super::format::{
    cell_cost, encode_record, push_sort_key, put_varint, sort_key_text, varint_len, CellArea,
    Geometry, Value, INDEX_INTERIOR, INDEX_LEAF,
};
use super::index::entry_record;
use super::table::write_overflow;

/// Why an entry could not be added.
#[derive(Debug)]
pub enum SortedError {
    Io(io::Error),
    /// A UNIQUE index got an equal key twice (its first column, as text).
    Duplicate(String),
    /// Entries out of (key, rowid) order (the text says which).
    Order(String),
}

impl From<io::Error> for SortedError {
    fn from(e: io::Error) -> SortedError {
        SortedError::Io(e)
    }
}

/// One index being written from sorted entries.
pub struct SortedIndex {
    geo: Geometry,
    unique: bool,
    leaf: Level,
    /// Interior levels, the lowest first.
    interior: Vec<Level>,
    /// The previous entry's sort key and rowid (order and uniqueness checks).
    last: Option<(Vec<u8>, i64)>,
    key: Vec<u8>,
    record: Vec<u8>,
    entries: u64,
}

/// A page just written and the divider between it and the next page of its level, for the
/// level above.
type Up = Option<(u32, Vec<u8>)>;

/// The page being filled on one level: each cell's child page (interior levels) and its body
/// (payload size, local payload, first overflow page), and the cell that did not fit.
#[derive(Default)]
struct Level {
    cells: Vec<(u32, Vec<u8>)>,
    used: usize,
    held: Option<(u32, Vec<u8>)>,
}

impl SortedIndex {
    pub fn new(geo: Geometry, unique: bool) -> SortedIndex {
        SortedIndex {
            geo,
            unique,
            leaf: Level::default(),
            interior: Vec::new(),
            last: None,
            key: Vec::new(),
            record: Vec::new(),
            entries: 0,
        }
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Adds the entry (`values`…, `rowid`), which must follow the previous one in SQLite's
    /// order (by values, then rowid).
    pub fn push(
        &mut self,
        values: &[Value<'_>],
        rowid: i64,
        file: &mut PageFile,
    ) -> Result<(), SortedError> {
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        index_key(values, &mut key);
        self.record.clear();
        let mut entry = values.to_vec();
        entry.push(Value::Int(rowid));
        encode_record(&entry, &mut self.record);
        let pushed = self.push_record(&key, rowid, file);
        self.key = key;
        pushed
    }

    /// [`push`](Self::push) of the entry whose sort key ([`index_key`]) is `key`, its columns
    /// stored as REAL flagged in `reals` (bit `i` for column `i`).
    pub fn push_key(
        &mut self,
        key: &[u8],
        reals: u64,
        rowid: i64,
        file: &mut PageFile,
    ) -> Result<(), SortedError> {
        self.record.clear();
        if !entry_record(key, reals, rowid, &mut self.record) {
            return Err(SortedError::Io(io::Error::other(
                "internal error: an index key could not be read back",
            )));
        }
        self.push_record(key, rowid, file)
    }

    /// Adds the entry of sort key `key` whose record is in `self.record`.
    fn push_record(
        &mut self,
        key: &[u8],
        rowid: i64,
        file: &mut PageFile,
    ) -> Result<(), SortedError> {
        if let Some((last, last_rowid)) = &self.last {
            match last.as_slice().cmp(key) {
                std::cmp::Ordering::Equal if self.unique => {
                    return Err(SortedError::Duplicate(sort_key_text(key)))
                }
                std::cmp::Ordering::Greater => {
                    return Err(SortedError::Order(format!(
                        "key {} after {}",
                        sort_key_text(key),
                        sort_key_text(last)
                    )))
                }
                std::cmp::Ordering::Equal if *last_rowid >= rowid => {
                    return Err(SortedError::Order(format!(
                        "rowid {rowid} after {last_rowid} with the same key"
                    )))
                }
                _ => {}
            }
        }
        match &mut self.last {
            Some((last, r)) => {
                last.clear();
                last.extend_from_slice(key);
                *r = rowid;
            }
            None => self.last = Some((key.to_vec(), rowid)),
        }
        let body = cell_body(&self.record, self.geo, file)?;
        self.entries += 1;
        let up = self.leaf.push(0, body, self.geo, false, file)?;
        Ok(self.push_up(0, up, file)?)
    }

    /// Hands a page and its divider written by level `k - 1` (if any) to level `k`, and so on
    /// up while levels fill.
    fn push_up(&mut self, mut k: usize, mut up: Up, file: &mut PageFile) -> io::Result<()> {
        while let Some((child, divider)) = up {
            if k == self.interior.len() {
                self.interior.push(Level::default());
            }
            up = self.interior[k].push(child, divider, self.geo, true, file)?;
            k += 1;
        }
        Ok(())
    }

    /// Writes the pages still being filled, bottom up; returns the root page.
    pub fn finish(mut self, file: &mut PageFile) -> io::Result<u32> {
        let leaf = std::mem::take(&mut self.leaf);
        let (up, mut child) = leaf.finish(None, self.geo, false, file)?;
        self.push_up(0, up, file)?;
        let mut k = 0;
        while k < self.interior.len() {
            let level = std::mem::take(&mut self.interior[k]);
            let (up, page) = level.finish(Some(child), self.geo, true, file)?;
            self.push_up(k + 1, up, file)?;
            child = page;
            k += 1;
        }
        Ok(child)
    }
}

impl Level {
    fn cost(body: &[u8], interior: bool) -> usize {
        cell_cost(body.len() + if interior { 4 } else { 0 })
    }

    fn capacity(geo: Geometry, interior: bool) -> usize {
        geo.page_size - if interior { 12 } else { 8 }
    }

    /// Adds a cell (child page, body); returns the page written and its divider when a page
    /// was completed.
    fn push(
        &mut self,
        child: u32,
        body: Vec<u8>,
        geo: Geometry,
        interior: bool,
        file: &mut PageFile,
    ) -> io::Result<Up> {
        if let Some((held_child, divider)) = self.held.take() {
            // The held cell was not the last: it divides the full page from the next.
            let page = self.write(Some(held_child), geo, interior, file)?;
            self.add(child, body, interior);
            return Ok(Some((page, divider)));
        }
        if self.cells.is_empty()
            || self.used + Self::cost(&body, interior) <= Self::capacity(geo, interior)
        {
            self.add(child, body, interior);
        } else {
            self.held = Some((child, body));
        }
        Ok(None)
    }

    fn add(&mut self, child: u32, body: Vec<u8>, interior: bool) {
        self.used += Self::cost(&body, interior);
        self.cells.push((child, body));
    }

    /// Writes the level's last page(s), `right` being the right-most child of an interior
    /// level; returns the divider pushed up (when two pages were needed) and the last page.
    fn finish(
        mut self,
        right: Option<u32>,
        geo: Geometry,
        interior: bool,
        file: &mut PageFile,
    ) -> io::Result<(Up, u32)> {
        let mut up = None;
        if let Some(held) = self.held.take() {
            // The held cell is the last: a page of it alone would have no divider after it, so
            // the full page's own last cell becomes the divider, and the held one starts the
            // last page. A page holds at least four cells, so the full one keeps some.
            let Some((last_child, divider)) = self.cells.pop() else {
                return Err(io::Error::other("internal: an index page with one cell"));
            };
            let page = self.write(Some(last_child), geo, interior, file)?;
            up = Some((page, divider));
            self.add(held.0, held.1, interior);
        }
        let page = self.write(right, geo, interior, file)?;
        Ok((up, page))
    }

    /// Writes the cells as one page (`right`: the right-most child of an interior page) and
    /// empties the level.
    fn write(
        &mut self,
        right: Option<u32>,
        geo: Geometry,
        interior: bool,
        file: &mut PageFile,
    ) -> io::Result<u32> {
        let mut page = vec![0u8; geo.page_size];
        let kind = if interior { INDEX_INTERIOR } else { INDEX_LEAF };
        let mut area = CellArea::new(kind, 0, geo.page_size);
        for (child, body) in self.cells.drain(..) {
            if interior {
                let cell = area.push(&mut page, 4 + body.len());
                cell[..4].copy_from_slice(&child.to_be_bytes());
                cell[4..].copy_from_slice(&body);
            } else {
                area.push(&mut page, body.len()).copy_from_slice(&body);
            }
        }
        self.used = 0;
        area.finish(&mut page, right.unwrap_or(0));
        file.append(&page)
    }
}

/// An index cell without its child pointer: payload size, the payload's local part, and the
/// first overflow page when it spills (the overflow chain is written now).
fn cell_body(record: &[u8], geo: Geometry, file: &mut PageFile) -> io::Result<Vec<u8>> {
    let payload = record.len();
    let local = geo.index_local(payload);
    let mut body = vec![0u8; varint_len(payload as u64) + local];
    let at = put_varint(&mut body, payload as u64);
    body[at..].copy_from_slice(&record[..local]);
    if local < payload {
        let first = write_overflow(&record[local..], geo, file)?;
        body.extend_from_slice(&first.to_be_bytes());
    }
    Ok(body)
}

/// Appends the byte string whose order (memcmp) is SQLite's order of index keys of `values`
/// (BINARY collation): merging sorted entries by (this key, rowid) keeps SQLite's order.
pub fn index_key(values: &[Value<'_>], out: &mut Vec<u8>) {
    values.iter().for_each(|v| push_sort_key(v, out));
}

impl<'a> Value<'a> {
    /// A value as rusqlite reads it (from another `.vis.db`, say); `None` for a blob, which no
    /// column of ours holds.
    pub fn from_sql(v: &'a rusqlite::types::Value) -> Option<Value<'a>> {
        use rusqlite::types::Value as Sql;
        match v {
            Sql::Null => Some(Value::Null),
            Sql::Integer(i) => Some(Value::Int(*i)),
            Sql::Real(r) => Some(Value::Real(*r)),
            Sql::Text(t) => Some(Value::Text(t)),
            Sql::Blob(_) => None,
        }
    }
}
