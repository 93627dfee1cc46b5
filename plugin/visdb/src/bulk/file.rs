//! The database file, written front to back: every page is appended once, in page-number order,
//! except page 1 (header and `sqlite_schema`), which is reserved at the start and written last,
//! and the lock-byte page ([`lock_byte_page`]), which is left blank.

use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};

use super::format::lock_byte_page;

/// Pages appended so far and where the next one goes.
pub struct PageFile {
    out: BufWriter<File>,
    page_size: usize,
    /// Pages in the file, page 1 included.
    pages: u32,
    /// SQLite's lock-byte page for this page size: never written with data.
    lock: u32,
}

impl PageFile {
    /// Starts the file with a placeholder for page 1.
    pub fn new(file: File, page_size: usize) -> io::Result<PageFile> {
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.write_all(&vec![0u8; page_size])?;
        Ok(PageFile {
            out,
            page_size,
            pages: 1,
            lock: lock_byte_page(page_size),
        })
    }

    /// The number the next appended page gets (never the lock-byte page). The pages of one
    /// [`append`](Self::append) are numbered from there by [`Geometry::page_at`].
    ///
    /// [`Geometry::page_at`]: super::format::Geometry::page_at
    pub fn next_page(&self) -> u32 {
        if self.pages + 1 == self.lock {
            self.lock + 1
        } else {
            self.pages + 1
        }
    }

    /// Pages in the file so far.
    pub fn pages(&self) -> u32 {
        self.pages
    }

    /// Appends whole pages; returns the number of the first.
    pub fn append(&mut self, pages: &[u8]) -> io::Result<u32> {
        let count = u32::try_from(pages.len() / self.page_size)
            .ok()
            .filter(|n| (*n as usize) * self.page_size == pages.len())
            .ok_or_else(|| io::Error::other("not a whole number of pages"))?;
        let first = self.next_page();
        // SQLite's limit is 4294967294 pages (the lock-byte page may add one).
        self.pages
            .checked_add(count + 1)
            .filter(|n| *n < u32::MAX)
            .ok_or_else(|| io::Error::other("the database exceeds SQLite's page limit"))?;
        for page in pages.chunks(self.page_size) {
            if self.pages + 1 == self.lock {
                self.out.write_all(&vec![0u8; self.page_size])?;
                self.pages += 1;
            }
            self.out.write_all(page)?;
            self.pages += 1;
        }
        Ok(first)
    }

    /// Writes page 1 over its placeholder and closes the file.
    pub fn finish(self, page1: &[u8]) -> io::Result<()> {
        let mut file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(page1)?;
        file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bulk::format::Geometry;

    /// Regression: pages were written over SQLite's lock-byte page, and files above 1 GiB were
    /// unreadable from there on. A run of pages that crosses it leaves it blank, and its pages
    /// are numbered around it.
    #[test]
    fn the_lock_byte_page_is_skipped() {
        let page_size = 512;
        let geo = Geometry { page_size };
        let lock = lock_byte_page(page_size);
        assert_eq!(u64::from(lock - 1) * page_size as u64, 1 << 30);
        let tmp = tempfile::tempfile().unwrap();
        let mut file = PageFile::new(tmp.try_clone().unwrap(), page_size).unwrap();
        // As if the file already held every page up to two before the lock-byte page.
        file.pages = lock - 2;
        let run: Vec<u8> = (1..=3u8).flat_map(|b| vec![b; page_size]).collect();
        let first = file.append(&run).unwrap();
        assert_eq!(first, lock - 1);
        assert_eq!(
            (0..3).map(|k| geo.page_at(first, k)).collect::<Vec<_>>(),
            [lock - 1, lock + 1, lock + 2]
        );
        assert_eq!(file.pages(), lock + 2);
        // A run that starts right at the lock-byte page starts after it.
        file.pages = lock - 1;
        assert_eq!(file.next_page(), lock + 1);
        assert_eq!(geo.page_at(lock + 1, 1), lock + 2);
        file.finish(&vec![9u8; page_size]).unwrap();
        // What was written after page 1: page lock-1 (1s), a blank lock-byte page, then 2s, 3s.
        let mut bytes = Vec::new();
        let mut tmp = tmp;
        tmp.seek(SeekFrom::Start(0)).unwrap();
        std::io::Read::read_to_end(&mut tmp, &mut bytes).unwrap();
        let pages: Vec<u8> = bytes.chunks(page_size).map(|p| p[0]).collect();
        assert_eq!(pages, [9, 1, 0, 2, 3]);
        assert!(bytes[2 * page_size..3 * page_size].iter().all(|&b| b == 0));
    }
}
