//! The database file, written front to back: every page is appended once, in page-number order,
//! except page 1 (header and `sqlite_schema`), which is reserved at the start and written last.

use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};

/// Pages appended so far and where the next one goes.
pub struct PageFile {
    out: BufWriter<File>,
    page_size: usize,
    /// Pages in the file, page 1 included.
    pages: u32,
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
        })
    }

    /// The number the next appended page gets.
    pub fn next_page(&self) -> u32 {
        self.pages + 1
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
        // SQLite's limit is 4294967294 pages.
        self.pages = self
            .pages
            .checked_add(count)
            .filter(|n| *n < u32::MAX)
            .ok_or_else(|| io::Error::other("the database exceeds SQLite's page limit"))?;
        self.out.write_all(pages)?;
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
