//! Node items kept as places in `dump.json`, read again when they are needed.
//!
//! A node's items (its inputs, outputs, parameters; most of a graph's memory) are needed twice:
//! when a target node is compared with its golden partner, and when its row is written. Holding
//! them from reading to writing made memory grow with the dump (about 1.2 KB an entry a side).
//! A plain conversion keeps instead, per node, the byte span of its entry in `dump.json`
//! ([`EntrySpan`], 16 bytes) and reads the entry again from the file ([`DumpSource`]) when it
//! compares the pair and when it formats the row, a batch of rows at a time. The same bytes give
//! the same items: the entry is parsed by the same fast reader and flattened by the same code as
//! on the first reading, so the rows are those of a conversion that held every item.
//!
//! A parallel merge (which moves items between rank graphs) and a tensor compare (whose metrics
//! read the tensor files, too slow to do twice) hold their items as before
//! ([`crate::graph::Graph::hold_items`]).

use std::borrow::Cow;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use graph_ascend_dump::fastjson::Parser;
use graph_ascend_dump::{parse_op_packed, Confine, PackedItem};

use crate::error::ConvertError;
use crate::open_files::{self, OpenFiles};

/// Where one entry's raw JSON lies in `dump.json`, and whether it has any item: 12 bytes, as
/// every node of a plain conversion carries one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntrySpan {
    /// The offset's low and high 32 bits (two `u32`s: a `u64` would pad the span to 16 bytes).
    offset: [u32; 2],
    /// The length times two, plus one when the entry has items (never 0: an entry is at least
    /// one byte; the zero is the niche that keeps `Option<EntrySpan>` at 12 bytes).
    len_items: std::num::NonZeroU32,
}

impl EntrySpan {
    /// The span of an entry of `len` bytes at `offset`; `None` when it is too long to keep as a
    /// span (2 GiB) or empty: such an entry is held.
    pub fn new(offset: usize, len: usize, has_items: bool) -> Option<EntrySpan> {
        let offset = u64::try_from(offset).ok()?;
        let len = u32::try_from(len).ok().filter(|&l| l < 1 << 31)?;
        Some(EntrySpan {
            offset: [offset as u32, (offset >> 32) as u32],
            len_items: std::num::NonZeroU32::new(len << 1 | u32::from(has_items))
                .filter(|_| len > 0)?,
        })
    }

    pub fn offset(&self) -> u64 {
        u64::from(self.offset[0]) | u64::from(self.offset[1]) << 32
    }

    pub fn len(&self) -> u32 {
        self.len_items.get() >> 1
    }

    /// The entry flattens into at least one item (msprobe compares only such nodes).
    pub fn has_items(&self) -> bool {
        self.len_items.get() & 1 == 1
    }
}

/// The `dump.json` a graph's spans point into. It is not held open for the graph's life (a run
/// of thousands of graphs would pass the limit of open files): it is read through the process's
/// bounded pool of open files ([`OpenFiles`]), opened again when the pool has closed it, and
/// then checked to be the same file (device and inode) as the one first opened.
#[derive(Debug)]
pub struct DumpSource {
    /// Its key in the pool.
    key: u64,
    path: PathBuf,
    confine: Confine,
    /// The device and inode of the file first opened.
    identity: (u64, u64),
}

/// A node's items: `(input, output)`, as a graph's node holds them.
pub type NodeItems = (Vec<(String, PackedItem)>, Vec<(String, PackedItem)>);

impl DumpSource {
    /// Opens `path` (the `dump.json` just read) for reading entries again; it stays in the pool
    /// until the pool needs the room.
    pub fn open(path: &Path, confine: &Confine) -> Result<DumpSource, ConvertError> {
        let (file, identity) = open_with_identity(path, confine)?;
        let source = DumpSource {
            key: open_files::new_key(),
            path: path.to_path_buf(),
            confine: confine.clone(),
            identity,
        };
        OpenFiles::global().insert(source.key, Arc::new(file));
        Ok(source)
    }

    /// The open file: from the pool, or opened again (and put in the pool) when it is the same
    /// file as the one first opened.
    fn file(&self) -> Result<Arc<File>, ConvertError> {
        let pool = OpenFiles::global();
        if let Some(file) = pool.get(self.key) {
            return Ok(file);
        }
        let (file, identity) = open_with_identity(&self.path, &self.confine)?;
        if identity != self.identity {
            return Err(ConvertError::Input {
                path: self.path.clone(),
                message: "changed while being converted: another file took its name".into(),
            });
        }
        let file = Arc::new(file);
        pool.insert(self.key, Arc::clone(&file));
        Ok(file)
    }

    /// The items of op `name`, whose entry lies at `span`: read and flattened again.
    pub fn items(&self, name: &str, span: EntrySpan) -> Result<NodeItems, ConvertError> {
        use std::os::unix::fs::FileExt;
        let changed = |what: &str| ConvertError::Input {
            path: self.path.clone(),
            message: format!(
                "changed while being converted: the entry of {name} at byte {} {what}",
                span.offset()
            ),
        };
        let mut buf = vec![0u8; span.len() as usize];
        self.file()?
            .read_exact_at(&mut buf, span.offset())
            .map_err(|e| changed(&format!("cannot be read again ({e})")))?;
        let mut parser = Parser::new(&buf).ok_or_else(|| changed("is no longer UTF-8"))?;
        let entry = parser
            .value()
            .ok()
            .filter(|_| parser.at_end())
            .ok_or_else(|| changed("is no longer one JSON value"))?;
        let op = parse_op_packed(name, &entry);
        Ok((op.input, op.output))
    }
}

impl Drop for DumpSource {
    fn drop(&mut self) {
        OpenFiles::global().remove(self.key);
    }
}

/// `path` opened for reading, with its device and inode.
fn open_with_identity(path: &Path, confine: &Confine) -> Result<(File, (u64, u64)), ConvertError> {
    use std::os::unix::fs::MetadataExt;
    let cannot = |e: &dyn std::fmt::Display| ConvertError::Input {
        path: path.to_path_buf(),
        message: format!("cannot open again to read its entries: {e}"),
    };
    let file = confine.open(path).map_err(|e| cannot(&e))?;
    let meta = file.metadata().map_err(|e| cannot(&e))?;
    Ok((file, (meta.dev(), meta.ino())))
}

/// A node's items, borrowed from the node or read again: `(input, output)`.
pub type ItemsOf<'a> = (
    Cow<'a, [(String, PackedItem)]>,
    Cow<'a, [(String, PackedItem)]>,
);
