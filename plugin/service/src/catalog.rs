//! The catalog: every `.vis.db` under the logdir, grouped into runs (folders), each checked.
//!
//! A scan walks the logdir itself and the folders below it (to [`MAX_DEPTH`] levels, skipping
//! dump folders), so that runs are folders as in msprobe's plugin. Unlike msprobe, every file of a
//! folder is listed, not only the first. Each file is opened and its schema checked once per
//! (size, modification time); a file that fails is listed as an error naming it and saying why,
//! and never hides the others. A file that is still being written (no indexes yet) or copied in
//! (it cannot be opened and its size or time changed lately) is held back, not reported, until it
//! is complete or its size settles. A folder that cannot be read is listed as an error too; a
//! file that links outside the logdir is served read-only. The walk also removes what killed
//! writers left in the folders it lists (staging folders, temporary files: see
//! [`graph_ascend_visdb::stale`]). Files are served through [`GraphFile`] handles, which keep a few
//! open connections for reuse and are replaced when the file on disk changes.
//!
//! A check reads the file's schema and configuration only, never its graphs, so a file of
//! thousands of graphs (steps × ranks) is listed and opened as fast as a file of one. The graphs'
//! indexes are built per (step, rank, side) when first used, and all files' indexes together stay
//! under one memory bound (see [`crate::graph_index::IndexBudget`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use graph_ascend_visdb::store::GraphKey;
use graph_ascend_visdb::{Store, StoreError};

use crate::edit_gate::{EditGate, EditRefused, ReadPass};
use crate::graph_index::{CachedRows, GraphIndex, IndexBudget, IndexCache, RowCache};
use crate::step_aside::StepAside;

/// The file name suffix of the files we serve.
pub const VIS_DB_SUFFIX: &str = ".vis.db";
/// How deep below the logdir runs are looked for.
const MAX_DEPTH: usize = 3;
/// How many idle connections a file keeps.
const POOL_SIZE: usize = 4;
/// A file without its indexes that changed this recently is taken to be still being written
/// (msprobe writes in place and adds the indexes last) and is not offered yet.
const SETTLE_TIME: std::time::Duration = std::time::Duration::from_secs(60);
/// A recently changed file that cannot be opened (a copy into the logdir under way, say) is
/// reported only once its size and modification time stayed the same this long, across scans.
const SIZE_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// One servable `.vis.db`.
pub struct GraphFile {
    pub run: String,
    pub tag: String,
    pub path: PathBuf,
    stamp: FileStamp,
    /// Idle readers, each with the generation of the gate it was opened at.
    idle: Mutex<Vec<(u64, Store)>>,
    /// The gate between reads and edits of this file's path (`edit_gate`), shared by every
    /// version of the file the catalog hands out.
    gate: Arc<EditGate>,
    /// Bumped by every edit, so that a reader taken from the pool before it is not put back.
    edits: std::sync::atomic::AtomicU64,
    /// Indexes of this version of the file (a changed file gets a new `GraphFile`).
    indexes: IndexCache,
    /// Children lists recently read for layouts.
    rows: RowCache,
    /// Why this file is served read-only: it is a link to a file outside the logdir.
    read_only: Option<String>,
}

impl GraphFile {
    /// Runs `f` with an open store of this file (a pooled one when available), holding a read
    /// pass of the file's gate: no edit of the file by this sidecar writes while `f` reads.
    pub fn with_store<T>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let _pass = self.read_pass();
        let generation = self.gate.generation();
        let pooled = {
            let mut idle = crate::sync::lock(&self.idle);
            // Readers opened before an edit (through another version's handle) are dropped.
            idle.retain(|(opened_at, _)| *opened_at == generation);
            idle.pop()
        };
        let store = match pooled {
            Some((_, store)) => store,
            None => Store::open(&self.path)?,
        };
        let result = f(&store);
        let mut idle = crate::sync::lock(&self.idle);
        if idle.len() < POOL_SIZE {
            idle.push((generation, store));
        }
        result
    }

    /// A read pass of this file (`edit_gate`), for reads that open the file themselves (the
    /// diagnosis's, the maps'): hold it for as long as they read.
    pub fn read_pass(&self) -> ReadPass {
        self.gate.read()
    }

    /// Runs `f` with a new read-write store of this file, for an edit, once no read of the file
    /// is in flight and with new ones kept back until the store is closed (`edit_gate`). The
    /// pooled readers are dropped before reads go on: they open the file immutable (see
    /// [`Store::open`]) and would not see the edit.
    pub fn with_writable_store<T>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if let Some(reason) = &self.read_only {
            return Err(StoreError::ReadOnly {
                path: self.path.clone(),
                reason: reason.clone(),
            });
        }
        let edited = self.gate.edit(|| {
            let store = Store::open_for_edit(&self.path)?;
            let result = f(&store);
            // Closing the store may write the file too (a checkpoint in WAL mode).
            drop(store);
            self.edits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            crate::sync::lock(&self.idle).clear();
            result
        });
        edited.unwrap_or_else(|refused| {
            Err(StoreError::Busy {
                path: self.path.clone(),
                reason: match refused {
                    EditRefused::Busy => format!(
                        "reads of the file were still under way after {} s; try again",
                        crate::edit_gate::EDIT_WAIT.as_secs()
                    ),
                    EditRefused::ReadingHere => {
                        "an edit was asked for while this thread reads the file".into()
                    }
                },
            })
        })
    }

    /// How many edits were made to this version of the file through the sidecar (a version of
    /// the file and its edit count name what the caches may keep).
    pub fn edit_count(&self) -> u64 {
        self.edits.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The in-memory index of one graph of this file, read on first use.
    pub fn index(&self, graph: GraphKey) -> Result<Arc<GraphIndex>, StoreError> {
        self.index_between(graph, || {})
    }

    /// [`GraphFile::index`], calling `between` before the build opens the file and between
    /// its steps (a background build pauses there when asked to: `step_aside`).
    fn index_between(
        &self,
        graph: GraphKey,
        mut between: impl FnMut(),
    ) -> Result<Arc<GraphIndex>, StoreError> {
        self.indexes.get(graph, || {
            between();
            self.with_store(|s| GraphIndex::build(s, graph, between))
        })
    }

    /// Starts building the indexes of `graphs` in the background, one thread per graph (the two
    /// sides of a compare are read at once, each on its own connection), unless they are built
    /// or being built already, so that the first node list, filter or search waits for the
    /// slower side rather than for both in turn. The builds pause when `gate` asks them to.
    pub fn prefetch(self: &Arc<Self>, graphs: Vec<GraphKey>, gate: &Arc<StepAside>) {
        for graph in graphs.into_iter().filter(|g| !self.indexes.has(*g)) {
            let file = self.clone();
            let gate = gate.clone();
            let spawned = std::thread::Builder::new()
                .name("graph-ascend-index".into())
                .spawn(move || {
                    if let Err(e) = file.index_between(graph, || gate.wait()) {
                        tracing::debug!("indexing {} failed: {e}", file.path.display());
                    }
                });
            if let Err(e) = spawned {
                tracing::debug!("cannot start an indexing thread: {e}");
            }
        }
    }

    /// Runs `f` with a store of this file read through its cache of children lists.
    pub fn with_cached_rows<T>(
        &self,
        f: impl FnOnce(&CachedRows<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.with_store(|store| {
            f(&CachedRows {
                store,
                cache: &self.rows,
            })
        })
    }

    /// Forgets what is cached of this file: its indexes and rows (after an edit). Returns the
    /// graphs that were indexed.
    pub fn invalidate_indexes(&self) -> Vec<GraphKey> {
        self.rows.invalidate();
        self.indexes.invalidate()
    }
}

/// What identifies one version of a file on disk: the file's size and modification time, and
/// those of its write-ahead log (`<file>-wal`), where commits to a file in WAL mode (ours, and
/// edits by other programs) go until SQLite checkpoints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    wal: Option<(u64, Option<SystemTime>)>,
}

/// What a check of one file found.
enum Check {
    Ready,
    BeingWritten,
}

impl FileStamp {
    fn is_recent(&self) -> bool {
        self.modified
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age < SETTLE_TIME)
    }

    fn of(path: &Path) -> std::io::Result<FileStamp> {
        let meta = std::fs::metadata(path)?;
        let mut wal_path = path.as_os_str().to_owned();
        wal_path.push("-wal");
        let wal = std::fs::metadata(PathBuf::from(wal_path))
            .ok()
            .map(|m| (m.len(), m.modified().ok()));
        Ok(FileStamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            wal,
        })
    }
}

/// One entry of the listing: `{run, tag, info}` for files that cannot be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogError {
    pub run: String,
    pub tag: String,
    pub info: String,
}

/// A listing of the logdir.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// Runs in natural order, each with its tags in natural order.
    pub runs: Vec<(String, Vec<String>)>,
    pub errors: Vec<CatalogError>,
}

/// Why a file of the logdir is listed as an error rather than served. Kept per file version,
/// so that a broken file is not opened again on every scan.
#[derive(Debug, Clone, thiserror::Error)]
enum FileProblem {
    /// Its size and modification time cannot be read.
    #[error("{}: {reason}", path.display())]
    Stat { path: PathBuf, reason: String },
    /// It does not open as a `.vis.db`; the store's message names the file.
    #[error("{0}")]
    Unreadable(Arc<StoreError>),
}

#[derive(Default)]
struct Known {
    files: HashMap<PathBuf, Arc<GraphFile>>,
    failures: HashMap<PathBuf, (FileStamp, FileProblem)>,
    by_name: HashMap<(String, String), PathBuf>,
    /// The last scan's errors by `(run, tag)`: why a file named by a request is not served.
    problems: HashMap<(String, String), String>,
    /// Recently changed files that could not be opened, held back: the stamp seen and when it
    /// was first seen.
    unsettled: HashMap<PathBuf, (FileStamp, Instant)>,
}

impl Known {
    /// Whether `path` showed `stamp` for [`SIZE_SETTLE`] already; remembers it otherwise.
    fn settled(&mut self, path: &Path, stamp: FileStamp) -> bool {
        match self.unsettled.get(path) {
            Some((seen, since)) if *seen == stamp => since.elapsed() >= SIZE_SETTLE,
            _ => {
                self.unsettled
                    .insert(path.to_owned(), (stamp, Instant::now()));
                false
            }
        }
    }
}

/// The logdir's files, rescanned on demand.
pub struct Catalog {
    logdir: PathBuf,
    known: Mutex<Known>,
    /// The gate of each file's path (`edit_gate`), by the path with links resolved, kept for
    /// as long as the catalog lives (a few words per file ever seen).
    gates: Mutex<HashMap<PathBuf, Arc<EditGate>>>,
    /// The bound on the indexes of all files together.
    indexes: Arc<IndexBudget>,
}

impl Catalog {
    pub fn new(logdir: PathBuf) -> Catalog {
        Catalog {
            logdir,
            known: Mutex::new(Known::default()),
            gates: Mutex::default(),
            indexes: Arc::default(),
        }
    }

    /// This catalog with the indexes of all its files bounded to about `bytes` together.
    pub fn with_index_memory(self, bytes: usize) -> Catalog {
        Catalog {
            indexes: Arc::new(IndexBudget::with_max_bytes(bytes)),
            ..self
        }
    }

    /// The bound on the indexes of all files, and what they hold now.
    pub fn index_budget(&self) -> &IndexBudget {
        &self.indexes
    }

    pub fn logdir(&self) -> &Path {
        &self.logdir
    }

    /// The gate of the file at `path` (one per real file, whatever names lead to it).
    fn gate_of(&self, path: &Path) -> Arc<EditGate> {
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        crate::sync::lock(&self.gates)
            .entry(real)
            .or_default()
            .clone()
    }

    /// Walks the logdir and returns what it holds now.
    pub fn scan(&self) -> Listing {
        let mut listing = Listing::default();
        if !self.logdir.is_dir() {
            listing.errors.push(CatalogError {
                run: self.run_name(&self.logdir),
                tag: String::new(),
                info: "Error logdir: not a readable directory".into(),
            });
            return listing;
        }
        let mut found: Vec<(String, String, PathBuf)> = Vec::new();
        self.walk(&self.logdir, 0, &mut found, &mut listing.errors);
        let mut known = crate::sync::lock(&self.known);
        let mut runs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut by_name = HashMap::new();
        let mut still_there = std::collections::HashSet::new();
        for (run, tag, path) in found {
            if let Some(shown) = self.non_utf8_path(&path) {
                listing.errors.push(CatalogError {
                    run,
                    tag,
                    info: format!(
                        "Error: the name {shown} is not UTF-8 text (bytes that are not are shown \
                         as \\xNN); only files whose path below the logdir is UTF-8 are served: \
                         rename the folder or the file (for example with `convmv -f gbk -t utf8`)"
                    ),
                });
                continue;
            }
            still_there.insert(path.clone());
            match self.check(&mut known, &run, &tag, &path) {
                Ok(Check::Ready) => {
                    runs.entry(run.clone()).or_default().push(tag.clone());
                    by_name.insert((run, tag), path);
                }
                Ok(Check::BeingWritten) => {
                    tracing::debug!("{} is still being written", path.display());
                }
                Err(problem) => listing.errors.push(CatalogError {
                    run,
                    tag,
                    info: format!("Error: {problem}"),
                }),
            }
        }
        // Readers see paths below the logdir only, as in a conversion's errors: the server's
        // own folders are not the browser's business.
        for e in &mut listing.errors {
            e.info = crate::paths::relative_text(&self.logdir, &e.info);
        }
        known.files.retain(|p, _| still_there.contains(p));
        known.failures.retain(|p, _| still_there.contains(p));
        known.unsettled.retain(|p, _| still_there.contains(p));
        known.by_name = by_name;
        known.problems = listing
            .errors
            .iter()
            .map(|e| {
                let reason = e.info.strip_prefix("Error: ").unwrap_or(&e.info);
                ((e.run.clone(), e.tag.clone()), reason.to_owned())
            })
            .collect();
        let mut runs: Vec<(String, Vec<String>)> = runs.into_iter().collect();
        for (_, tags) in &mut runs {
            tags.sort_by(|a, b| natural_cmp(a, b));
        }
        runs.sort_by(|a, b| natural_cmp(&a.0, &b.0));
        listing.runs = runs;
        listing
    }

    /// The file for `(run, tag)`; rescans once when it is not known (yet).
    pub fn file(&self, run: &str, tag: &str) -> Option<Arc<GraphFile>> {
        let lookup = |cat: &Catalog| {
            let known = crate::sync::lock(&cat.known);
            let path = known.by_name.get(&(run.to_owned(), tag.to_owned()))?;
            known.files.get(path).cloned()
        };
        if let Some(file) = lookup(self).filter(|f| FileStamp::of(&f.path).ok() == Some(f.stamp)) {
            return Some(file);
        }
        self.scan();
        lookup(self)
    }

    /// Why `(run, tag)` is not served, for a request that names it after [`Self::file`] found
    /// nothing: the listing's error for it (the file and what is wrong), or that the logdir
    /// holds no such file.
    pub fn unserved_reason(&self, run: &str, tag: &str) -> String {
        let known = crate::sync::lock(&self.known);
        let key = (run.to_owned(), tag.to_owned());
        if let Some(problem) = known.problems.get(&key) {
            return problem.clone();
        }
        if known.by_name.contains_key(&key) {
            return format!(
                "{tag}{VIS_DB_SUFFIX} of run {run} changed while it was opened; try again"
            );
        }
        format!(
            "the logdir holds no {tag}{VIS_DB_SUFFIX} in run {run:?} (it was moved or removed, \
             or is still being written)"
        )
    }

    /// The folder of a run, if it is known.
    pub fn run_dir(&self, run: &str) -> Option<PathBuf> {
        let known = crate::sync::lock(&self.known);
        known
            .by_name
            .iter()
            .find(|((r, _), _)| r == run)
            .and_then(|(_, path)| path.parent().map(Path::to_path_buf))
    }

    /// A run's first file in natural order (msprobe's fallback when a request names no tag).
    pub fn first_tag(&self, run: &str) -> Option<String> {
        let known = crate::sync::lock(&self.known);
        known
            .by_name
            .keys()
            .filter(|(r, _)| r == run)
            .map(|(_, t)| t.clone())
            .min_by(|a, b| natural_cmp(a, b))
    }

    fn check(
        &self,
        known: &mut Known,
        run: &str,
        tag: &str,
        path: &Path,
    ) -> Result<Check, FileProblem> {
        let stamp = FileStamp::of(path).map_err(|e| FileProblem::Stat {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        if let Some(file) = known.files.get(path) {
            if file.stamp == stamp {
                return Ok(Check::Ready);
            }
        }
        if let Some((failed_stamp, info)) = known.failures.get(path) {
            if *failed_stamp == stamp {
                return Err(info.clone());
            }
        }
        known.files.remove(path);
        let gate = self.gate_of(path);
        let pass = gate.read();
        let generation = gate.generation();
        let opened = Store::open(path).and_then(|store| {
            let complete = store.has_indexes()?;
            store.config().map(|_| (store, complete))
        });
        drop(pass);
        match opened {
            Ok((_, false)) if stamp.is_recent() => Ok(Check::BeingWritten),
            // A file still being copied in reads as malformed or truncated: wait until its size
            // settles before saying so.
            Err(_) if stamp.is_recent() && !known.settled(path, stamp) => Ok(Check::BeingWritten),
            Ok((store, _)) => {
                // Opening a file in WAL mode may have created (or, closing the last connection
                // of the version replaced, checkpointed) its log: stamp what is there now.
                let stamp = FileStamp::of(path).unwrap_or(stamp);
                known.failures.remove(path);
                known.unsettled.remove(path);
                known.files.insert(
                    path.to_owned(),
                    Arc::new(GraphFile {
                        run: run.to_owned(),
                        tag: tag.to_owned(),
                        path: path.to_owned(),
                        stamp,
                        idle: Mutex::new(vec![(generation, store)]),
                        gate,
                        edits: Default::default(),
                        indexes: IndexCache::new(self.indexes.clone()),
                        rows: RowCache::default(),
                        read_only: self.outside_reason(path),
                    }),
                );
                Ok(Check::Ready)
            }
            Err(err) => {
                let problem = FileProblem::Unreadable(Arc::new(err));
                known
                    .failures
                    .insert(path.to_owned(), (stamp, problem.clone()));
                Err(problem)
            }
        }
    }

    /// Why `path` may only be read, when it resolves outside the logdir (a link to a file
    /// elsewhere): it is served, as TensorBoard serves linked runs, but never changed, as
    /// conversions never write outside the logdir (`crate::paths`).
    fn outside_reason(&self, path: &Path) -> Option<String> {
        let logdir = std::fs::canonicalize(&self.logdir).unwrap_or_else(|_| self.logdir.clone());
        let real = match std::fs::canonicalize(path) {
            Ok(real) if real.starts_with(&logdir) => return None,
            Ok(real) => real.display().to_string(),
            Err(e) => format!("a place that cannot be resolved ({e})"),
        };
        Some(format!(
            "it links to {real}, outside the logdir {}; files outside the logdir are served but \
             never changed",
            logdir.display()
        ))
    }

    /// Collects the `.vis.db` files of `dir` and the folders below it into `found`; a folder
    /// that cannot be read is an error of `errors`, naming it and saying why, not a silent gap.
    fn walk(
        &self,
        dir: &Path,
        depth: usize,
        found: &mut Vec<(String, String, PathBuf)>,
        errors: &mut Vec<CatalogError>,
    ) {
        let unreadable = |reason: std::io::Error| CatalogError {
            run: self.run_name(dir),
            tag: String::new(),
            info: format!(
                "Error: the folder {} cannot be read: {reason}",
                dir.display()
            ),
        };
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => return errors.push(unreadable(e)),
        };
        let mut entries: Vec<_> = match entries.collect::<std::io::Result<_>>() {
            Ok(entries) => entries,
            Err(e) => return errors.push(unreadable(e)),
        };
        entries.sort_by_key(|e| e.file_name());
        let is_dump_dir = entries
            .iter()
            .any(|e| e.file_name() == "dump.json" || e.file_name() == "construct.json");
        let run = self.run_name(dir);
        for entry in entries {
            let os_name = entry.file_name();
            let bytes = os_name.as_encoded_bytes();
            let path = entry.path();
            let file_type = entry.file_type().ok();
            let is_dir = file_type.is_some_and(|t| t.is_dir());
            // Hidden files are the converter's temporary outputs: not offered until renamed,
            // and removed when their writer is provably dead (a killed conversion's staging
            // folder, a killed writer's temporary file).
            if bytes.starts_with(b".") {
                if let Some(name) = os_name.to_str() {
                    remove_if_stale(&entry, name, is_dir);
                }
                continue;
            }
            if bytes.ends_with(VIS_DB_SUFFIX.as_bytes()) {
                // A folder or a dangling link with this name is listed, as an error.
                let name = os_name.to_string_lossy();
                found.push((run.clone(), tag_of(&name), path));
            } else if is_dir
                && depth + 1 < MAX_DEPTH
                && !is_dump_dir
                && bytes != b"dump_tensor_data"
            {
                self.walk(&path, depth + 1, found, errors);
            }
        }
    }

    /// The path of `path` below the logdir when it is not UTF-8 (a folder or file named in
    /// GBK or Latin-1, say), with the bytes that are not shown as `\xNN`; `None` for a UTF-8
    /// path. Such a file is listed as an error: its run and tag, shown with U+FFFD in place of
    /// those bytes, could not name it in a request (two names differing in them would show
    /// alike, and the browser sends UTF-8 text only).
    fn non_utf8_path(&self, path: &Path) -> Option<String> {
        let below = path.strip_prefix(&self.logdir).unwrap_or(path);
        if below.to_str().is_some() {
            return None;
        }
        Some(escaped_bytes(below.as_os_str().as_encoded_bytes()))
    }

    /// Removes what killed writers left in the logdir's folders (as a scan does), without
    /// opening any file: what the sidecar does when it starts.
    pub fn remove_leftovers(&self) {
        self.walk(&self.logdir, 0, &mut Vec::new(), &mut Vec::new());
    }

    /// A run is named by its folder: the folder's path below the logdir (its base name for the
    /// folders directly below, as msprobe names them), or the logdir's own base name.
    fn run_name(&self, dir: &Path) -> String {
        match dir.strip_prefix(&self.logdir) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/"),
            _ => self
                .logdir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| ".".into()),
        }
    }
}

/// Removes `entry` when it is a staging folder of a killed conversion
/// ([`graph_ascend_visdb::stale::STAGING_PREFIX`]) or a killed writer's temporary `.vis.db`
/// ([`graph_ascend_visdb::stale::TEMP_PREFIX`]) of this host (`graph_ascend_visdb::stale`).
fn remove_if_stale(entry: &std::fs::DirEntry, name: &str, is_dir: bool) {
    use graph_ascend_visdb::stale::{is_stale, STAGING_PREFIX, TEMP_PREFIX};
    let stale = if is_dir {
        is_stale(name, STAGING_PREFIX)
    } else {
        is_stale(name, TEMP_PREFIX)
    };
    if !stale {
        return;
    }
    let path = entry.path();
    let removed = if is_dir {
        std::fs::remove_dir_all(&path)
    } else {
        std::fs::remove_file(&path)
    };
    match removed {
        Ok(()) => tracing::info!("removed {}, left by a killed writer", path.display()),
        Err(e) => tracing::debug!("cannot remove {}: {e}", path.display()),
    }
}

/// `bytes` as text: UTF-8 where they are, each other byte as `\xNN`.
fn escaped_bytes(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

fn tag_of(file_name: &str) -> String {
    file_name
        .strip_suffix(VIS_DB_SUFFIX)
        .unwrap_or(file_name)
        .to_owned()
}

/// msprobe's natural order: names split on `/` and `_`, then into digit and non-digit runs;
/// numbers compare as numbers and come before words.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    #[derive(PartialEq, Eq, PartialOrd, Ord)]
    enum Token {
        Number(u128, usize),
        Word(String),
    }
    fn tokens(s: &str) -> Vec<Token> {
        let mut out = Vec::new();
        for part in s.split(['/', '_']) {
            let mut rest = part;
            while let Some(c) = rest.chars().next() {
                let digits = c.is_ascii_digit();
                let end = rest
                    .find(|ch: char| ch.is_ascii_digit() != digits)
                    .unwrap_or(rest.len());
                let (run, tail) = rest.split_at(end);
                out.push(if digits {
                    Token::Number(run.parse().unwrap_or(u128::MAX), run.len())
                } else {
                    Token::Word(run.to_owned())
                });
                rest = tail;
            }
        }
        out
    }
    tokens(a).cmp(&tokens(b)).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::natural_cmp;

    #[test]
    fn numbers_sort_numerically_and_before_words() {
        let mut v = vec!["run_10", "run_2", "run_a", "run_1"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["run_1", "run_2", "run_10", "run_a"]);
    }
}

#[cfg(test)]
mod settle_tests {
    use super::*;

    fn example() -> Vec<u8> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/build_tf_stats");
        let path = std::fs::read_dir(&dir)
            .expect("examples/build_tf_stats")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(VIS_DB_SUFFIX))
            .expect("an example .vis.db");
        std::fs::read(path).expect("read the example")
    }

    #[test]
    fn a_file_being_copied_is_held_back_until_its_size_settles() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("run");
        std::fs::create_dir(&run).expect("mkdir");
        let bytes = example();
        let path = run.join("copy.vis.db");
        std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("half a copy");
        let catalog = Catalog::new(dir.path().to_owned());
        for _ in 0..2 {
            let listing = catalog.scan();
            assert!(listing.errors.is_empty(), "{:?}", listing.errors);
            assert!(listing.runs.is_empty(), "{:?}", listing.runs);
        }
        // The copy goes on (the size changes): still held back, however long it takes.
        std::thread::sleep(SIZE_SETTLE);
        std::fs::write(&path, &bytes[..bytes.len() * 3 / 4]).expect("more of the copy");
        assert!(catalog.scan().errors.is_empty());
        // The copy completes: listed.
        std::fs::write(&path, &bytes).expect("the whole copy");
        let listing = catalog.scan();
        assert!(listing.errors.is_empty(), "{:?}", listing.errors);
        assert_eq!(listing.runs, [("run".to_owned(), vec!["copy".to_owned()])]);
    }

    #[test]
    fn a_broken_file_is_reported_once_its_size_settled() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("bad.vis.db");
        std::fs::write(&path, "this is not a SQLite file").expect("write");
        let catalog = Catalog::new(dir.path().to_owned());
        assert!(
            catalog.scan().errors.is_empty(),
            "held back while it may grow"
        );
        std::thread::sleep(SIZE_SETTLE);
        let listing = catalog.scan();
        assert_eq!(listing.errors.len(), 1, "{:?}", listing.errors);
        assert_eq!(listing.errors[0].tag, "bad");
    }

    /// Regression: a killed page conversion left its staging folder in the output folder,
    /// removed only when a conversion used that folder again.
    #[test]
    fn a_walk_removes_what_killed_writers_left() {
        use graph_ascend_visdb::stale::{dead_owner_tag, owner_tag};
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("run/out");
        let staging = |tag: &str| {
            out.join(format!(
                "{}{tag}.3",
                graph_ascend_visdb::stale::STAGING_PREFIX
            ))
        };
        let (dead, live) = (staging(&dead_owner_tag()), staging(&owner_tag()));
        for folder in [&dead, &live] {
            std::fs::create_dir_all(folder.join("inner")).expect("mkdir");
            std::fs::write(folder.join("inner/part.vis.db"), b"x").expect("write");
        }
        let temp = |tag: &str| out.join(format!(".graph-ascend-{tag}.x1.vis.db.tmp"));
        let (dead_temp, live_temp) = (temp(&dead_owner_tag()), temp(&owner_tag()));
        for file in [&dead_temp, &live_temp] {
            std::fs::write(file, b"x").expect("write");
        }
        let catalog = Catalog::new(dir.path().to_owned());
        catalog.remove_leftovers();
        assert!(
            !dead.exists() && !dead_temp.exists(),
            "a dead writer's are removed"
        );
        assert!(live.exists() && live_temp.exists(), "a live writer's stay");
        std::fs::create_dir_all(&dead).expect("mkdir");
        catalog.scan();
        assert!(!dead.exists(), "a scan removes them too");
    }

    /// Regression: a folder that could not be read vanished from the listing silently.
    #[test]
    fn an_unreadable_folder_is_listed_with_its_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("run");
        std::fs::create_dir(&run).expect("mkdir");
        std::fs::write(run.join("good.vis.db"), example()).expect("write");
        let catalog = Catalog::new(dir.path().to_owned());
        // A folder whose reading fails (here: gone between the listing of its parent and its
        // own, which a root user's test can make happen; permissions are below).
        let mut found = Vec::new();
        let mut errors = Vec::new();
        catalog.walk(&run.join("vanished"), 1, &mut found, &mut errors);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].run, "run/vanished");
        assert!(
            errors[0]
                .info
                .contains("vanished cannot be read: No such file"),
            "{}",
            errors[0].info
        );
        // A folder without read permission, for a user whom permissions bind (not root).
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).expect("mkdir");
        std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o000))
            .expect("chmod");
        let listing = catalog.scan();
        let bound = std::fs::read_dir(&locked).is_err();
        std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod back");
        assert_eq!(listing.runs, [("run".to_owned(), vec!["good".to_owned()])]);
        if bound {
            assert_eq!(listing.errors.len(), 1, "{:?}", listing.errors);
            assert_eq!(listing.errors[0].run, "locked");
            assert!(listing.errors[0].info.contains("Permission denied"));
        }
    }

    /// Regression: a `.vis.db` linked to a file outside the logdir was edited in place.
    #[test]
    fn a_link_outside_the_logdir_is_served_read_only() {
        let outside = tempfile::tempdir().expect("tempdir");
        let target = outside.path().join("elsewhere.vis.db");
        std::fs::write(&target, example()).expect("write");
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("run");
        std::fs::create_dir(&run).expect("mkdir");
        std::os::unix::fs::symlink(&target, run.join("linked.vis.db")).expect("link");
        // A link that stays inside the logdir is an ordinary file.
        std::fs::write(dir.path().join("inside.vis.db"), example()).expect("write");
        std::os::unix::fs::symlink(dir.path().join("inside.vis.db"), run.join("near.vis.db"))
            .expect("link");
        let catalog = Catalog::new(dir.path().to_owned());
        let listing = catalog.scan();
        assert!(listing.errors.is_empty(), "{:?}", listing.errors);
        let file = catalog.file("run", "linked").expect("listed");
        file.with_store(|s| s.config()).expect("read");
        let before = std::fs::read(&target).expect("read");
        let refused = file
            .with_writable_store(|s| s.write(|s| s.set_node_colors("{\"#010203\": {}}")))
            .expect_err("an edit of a file outside is refused")
            .to_string();
        assert!(refused.contains("linked.vis.db"), "{refused}");
        assert!(refused.contains("outside the logdir"), "{refused}");
        assert!(std::fs::read(&target).expect("read") == before, "unchanged");
        let near = catalog.file("run", "near").expect("listed");
        near.with_writable_store(|s| s.write(|s| s.set_node_colors("{\"#010203\": {}}")))
            .expect("a link inside the logdir is edited");
    }

    #[test]
    fn an_old_broken_file_is_reported_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("old.vis.db");
        std::fs::write(&path, "this is not a SQLite file").expect("write");
        let past = SystemTime::now() - 2 * SETTLE_TIME;
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(past))
            .expect("set mtime");
        let listing = Catalog::new(dir.path().to_owned()).scan();
        assert_eq!(listing.errors.len(), 1, "{:?}", listing.errors);
    }
}
