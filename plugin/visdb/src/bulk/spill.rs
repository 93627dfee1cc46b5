//! `tb_nodes`' index entries under a memory budget: sorted runs in a temporary file, merged into
//! [`SortedIndex`] at the end.
//!
//! # Why
//! Each row leaves one entry in each of `tb_nodes`' nine indexes (about 900 bytes a row in all),
//! and the indexes can only be written once every row is in: kept in memory, the entries of a
//! million-row conversion alone take 1.4 GB. So the writer keeps them in memory only
//! up to a budget ([`DEFAULT_BUDGET`] for all the indexes together); past it, each index's
//! entries are sorted and appended to one temporary file as a *run*, and memory is reused for
//! the next rows. At the end, each index's runs are merged (a k-way merge, [`RUN_BUFFER`] of
//! each run in memory) and fed in order to [`SortedIndex`], which writes the index page by page.
//! A file whose entries never pass the budget is written as before (sorted in memory,
//! [`super::index`]), byte for byte.
//!
//! The temporary file lies beside the output, named like the output's own temporary file
//! (`.graph-ascend-<host>.<pid>.<random>.index.tmp`, see [`crate::stale`]): removed when the
//! writer is dropped, and, if its process was killed, by the next writer in that folder.
//!
//! A caller with entries already sorted in several streams (the gather, [`super::writer`]'s
//! `SortedNodeRuns`: more parts than it may hold open) appends each stream as a run of its own
//! ([`SpilledEntries::push`], [`SpilledEntries::end_run`]) and has them merged the same way.
//!
//! # Run format
//! Entries back to back, each: LEB128 key length, the key ([`super::format::push_sort_key`]),
//! LEB128 REAL mask, LEB128 rowid. A run is a byte range of the file.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::file::PageFile;
use super::index::IndexRows;
use super::sorted::{SortedError, SortedIndex};

/// Bytes of index entries held in memory, all indexes together, before they are spilled.
pub const DEFAULT_BUDGET: usize = 32 << 20;

/// Read buffer of each run while merging.
const RUN_BUFFER: usize = 64 << 10;

/// Runs written so far, per index.
pub struct SpilledEntries {
    // Declared before `temp` so the file is closed before the temporary path is removed.
    out: BufWriter<File>,
    temp: tempfile::TempPath,
    len: u64,
    runs: Vec<Vec<Range<u64>>>,
    /// Where the run being appended entry by entry ([`push`](Self::push)) starts.
    open: u64,
}

impl SpilledEntries {
    /// A new temporary file in `dir` for the runs of `indexes` indexes.
    pub fn create(dir: &Path, indexes: usize) -> io::Result<SpilledEntries> {
        let (file, temp) = crate::stale::index_temp_in(dir)?.into_parts();
        Ok(SpilledEntries {
            out: BufWriter::with_capacity(1 << 20, file),
            temp,
            len: 0,
            runs: vec![Vec::new(); indexes],
            open: 0,
        })
    }

    /// Where the runs are (for messages).
    pub fn path(&self) -> &Path {
        &self.temp
    }

    /// Runs of index `i` so far.
    #[cfg(test)]
    pub fn runs(&self, i: usize) -> usize {
        self.runs.get(i).map_or(0, Vec::len)
    }

    /// Appends each index's entries as one sorted run and clears them (`entries[i]` is index
    /// `i`'s).
    pub fn spill(&mut self, entries: &mut [IndexRows]) -> io::Result<()> {
        for (rows, runs) in entries.iter_mut().zip(&mut self.runs) {
            if rows.len() == 0 {
                continue;
            }
            let start = self.len;
            for (key, reals, rowid) in rows.sorted() {
                self.len += write_entry(&mut self.out, key, reals, rowid)? as u64;
            }
            runs.push(start..self.len);
            rows.clear();
        }
        self.open = self.len;
        Ok(())
    }

    /// Appends the entry (sort key `key`, REAL mask `reals`, `rowid`) to the run being written;
    /// entries must come in SQLite's order (by key, then rowid).
    pub fn push(&mut self, key: &[u8], reals: u64, rowid: i64) -> io::Result<()> {
        self.len += write_entry(&mut self.out, key, reals, rowid)? as u64;
        Ok(())
    }

    /// Ends the run written by [`push`](Self::push) as one of index `i`'s.
    pub fn end_run(&mut self, i: usize) {
        if let Some(runs) = self.runs.get_mut(i) {
            runs.push(self.open..self.len);
        }
        self.open = self.len;
    }

    /// Feeds index `i`'s entries, every run merged, to `index` in SQLite's order.
    pub fn merge(
        &mut self,
        i: usize,
        index: &mut SortedIndex,
        file: &mut PageFile,
    ) -> Result<(), SortedError> {
        self.out.flush()?;
        let source = self.out.get_ref();
        let mut runs: Vec<Run<'_>> = (self.runs.get(i).into_iter().flatten())
            .map(|range| Run::new(source, range.clone()))
            .collect();
        let mut heap = BinaryHeap::with_capacity(runs.len());
        for (k, run) in runs.iter_mut().enumerate() {
            if let Some(head) = run.next(k, Vec::new())? {
                heap.push(Reverse(head));
            }
        }
        while let Some(Reverse(head)) = heap.pop() {
            index.push_key(&head.key, head.reals, head.rowid, file)?;
            if let Some(next) = runs[head.run].next(head.run, head.key)? {
                heap.push(Reverse(next));
            }
        }
        Ok(())
    }
}

/// Writes one entry in the run format; returns the bytes written.
fn write_entry(out: &mut impl Write, key: &[u8], reals: u64, rowid: i64) -> io::Result<usize> {
    let mut n = write_leb128(out, key.len() as u64)?;
    out.write_all(key)?;
    n += key.len();
    n += write_leb128(out, reals)?;
    n += write_leb128(out, rowid as u64)?;
    Ok(n)
}

/// The next entry of run `run`; ordered by (key, rowid), SQLite's order.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Head {
    key: Vec<u8>,
    rowid: i64,
    reals: u64,
    run: usize,
}

/// One run being read.
struct Run<'f> {
    reader: BufReader<RunBytes<'f>>,
}

impl<'f> Run<'f> {
    fn new(file: &'f File, range: Range<u64>) -> Run<'f> {
        Run {
            reader: BufReader::with_capacity(RUN_BUFFER, RunBytes { file, range }),
        }
    }

    /// The next entry, in `key`'s room; `None` at the run's end.
    fn next(&mut self, run: usize, mut key: Vec<u8>) -> io::Result<Option<Head>> {
        let Some(len) = read_leb128(&mut self.reader, true)? else {
            return Ok(None);
        };
        let len = usize::try_from(len)
            .ok()
            .filter(|&n| n <= MAX_KEY)
            .ok_or_else(|| corrupt("key length"))?;
        key.resize(len, 0);
        self.reader.read_exact(&mut key)?;
        let reals = read_leb128(&mut self.reader, false)?.ok_or_else(|| corrupt("entry"))?;
        let rowid = read_leb128(&mut self.reader, false)?.ok_or_else(|| corrupt("entry"))?;
        Ok(Some(Head {
            key,
            rowid: rowid as i64,
            reals,
            run,
        }))
    }
}

/// A key longer than any row could make (SQLite's own limit on a value is 1 GB): the run file
/// was damaged under us.
const MAX_KEY: usize = 1 << 31;

fn corrupt(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the index run file was changed while in use (bad {what})"),
    )
}

/// A byte range of the run file, read with `pread` (runs share the file, not a position).
struct RunBytes<'f> {
    file: &'f File,
    range: Range<u64>,
}

impl Read for RunBytes<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.range.end.saturating_sub(self.range.start);
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.range.start)?;
        if n == 0 {
            return Err(corrupt("length: the file is shorter than its runs"));
        }
        self.range.start += n as u64;
        Ok(n)
    }
}

/// Writes `v` as LEB128 (7 bits a byte, low first); returns the bytes written.
fn write_leb128(out: &mut impl Write, mut v: u64) -> io::Result<usize> {
    let mut buf = [0u8; 10];
    let mut n = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            buf[n] = byte;
            n += 1;
            break;
        }
        buf[n] = byte | 0x80;
        n += 1;
    }
    out.write_all(&buf[..n])?;
    Ok(n)
}

/// Reads a LEB128 number; `None` at the end of the input when `at_start_ok` (between entries).
fn read_leb128(input: &mut impl Read, at_start_ok: bool) -> io::Result<Option<u64>> {
    let mut v = 0u64;
    for i in 0..10 {
        let mut byte = [0u8];
        if input.read(&mut byte)? == 0 {
            return if i == 0 && at_start_ok {
                Ok(None)
            } else {
                Err(corrupt("entry: cut short"))
            };
        }
        v |= u64::from(byte[0] & 0x7f) << (7 * i);
        if byte[0] & 0x80 == 0 {
            return Ok(Some(v));
        }
    }
    Err(corrupt("number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leb128_round_trips() {
        let values = [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX];
        let mut bytes = Vec::new();
        for v in values {
            write_leb128(&mut bytes, v).unwrap();
        }
        let mut input = bytes.as_slice();
        for v in values {
            assert_eq!(read_leb128(&mut input, true).unwrap(), Some(v));
        }
        assert_eq!(read_leb128(&mut input, true).unwrap(), None);
        assert!(read_leb128(&mut [0x80u8].as_slice(), true).is_err());
    }
}
