//! A part: what one shard of a conversion writes (`convert --shard I/N`), for
//! [`crate::gather`] to combine. The contract is in `docs/scale.md`; in short:
//!
//! - a part is a `.vis.db` of the shard's graphs (every row complete but `matched_distributed`,
//!   which needs every rank and is made by the gather), named `shard-IIIII-of-NNNNN.vis.part`
//!   (not `.vis.db`: TensorBoard must not list half a run);
//! - it also holds a manifest, the table [`MANIFEST_TABLE`] of `(key, value)` rows: the run's
//!   fingerprint (format, version, options, inputs), which shard it is, which units it holds,
//!   and last the completeness mark `complete = 1`;
//! - it is written under a hidden temporary name tagged with host and pid, the manifest is
//!   added and committed, the file flushed, and only then renamed to its name. A task killed
//!   before that leaves only the temporary (never taken as a part; removed by the next run of
//!   any shard on that host); a re-run of a shard replaces only that shard's part.

use std::hash::Hasher;
use std::ops::Range;
use std::path::Path;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::error::ConvertError;
use crate::options::ConvertOptions;
use crate::shard::ShardSpec;

/// The manifest's table in a part.
pub const MANIFEST_TABLE: &str = "graph_ascend_part";

/// The extension of a sealed part.
pub const PART_SUFFIX: &str = ".vis.part";

/// The prefix of a part not sealed yet (`<prefix><host>.<pid>.shard-….vis.part`).
pub(crate) const UNSEALED_PREFIX: &str = ".graph-ascend-part-";

/// The part format this version writes and reads.
const FORMAT: &str = "1";

/// One (step, rank) of a run's inputs: its folders (the golden's in a compare), for the run's
/// fingerprint.
pub(crate) struct InputDirs<'a> {
    pub step: i64,
    pub rank: i64,
    pub target: &'a Path,
    pub golden: Option<&'a Path>,
}

/// What a part says about itself.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Manifest {
    pub format: String,
    /// `graph-ascend`'s version.
    pub version: String,
    /// The conversion's options (`-gp` or not, `-lm`, `-oc`, `-fm`).
    pub options: String,
    /// A hash of the inputs: every unit's step, rank and folders, and the size and mtime of
    /// their dump files.
    pub inputs: String,
    /// The target folder, for messages.
    pub target: String,
    pub shard: ShardSpec,
    /// The units of the whole plan.
    pub total_units: u64,
    /// The units this part holds: `first_unit..first_unit + units`.
    pub first_unit: u64,
    pub units: u64,
    /// `compare` or `build`.
    pub kind: String,
    /// The gather must link communication ops across ranks.
    pub link_distributed: bool,
    pub overflow_check: bool,
}

impl Manifest {
    /// The manifest of shard `shard`, which holds units `range` of `total_units`; `folders`:
    /// every (step, rank) folder the whole run reads (its fingerprint). A plain conversion's
    /// units are its (step, rank) graphs, a parallel merge's its steps (see [`crate::merge`]).
    pub(crate) fn of(
        opts: &ConvertOptions,
        folders: &[InputDirs],
        total_units: usize,
        shard: ShardSpec,
        range: &Range<usize>,
        link_distributed: bool,
    ) -> Manifest {
        let options = format!(
            "golden={} layer_mapping={:?} overflow_check={} fuzzy_match={} parallel={:?}",
            opts.golden.is_some(),
            opts.layer_mapping,
            opts.overflow_check,
            opts.fuzzy_match,
            opts.parallel
        );
        Manifest {
            format: FORMAT.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            options,
            inputs: inputs_hash(opts, folders),
            target: absolute(&opts.target),
            shard,
            total_units: total_units as u64,
            first_unit: range.start as u64,
            units: range.len() as u64,
            kind: if opts.golden.is_some() {
                "compare"
            } else {
                "build"
            }
            .into(),
            link_distributed,
            overflow_check: opts.overflow_check,
        }
    }

    /// The part's file name: `shard-IIIII-of-NNNNN.vis.part`.
    pub(crate) fn file_name(&self) -> String {
        part_name(self.shard)
    }

    fn rows(&self) -> Vec<(&'static str, String)> {
        vec![
            ("format", self.format.clone()),
            ("version", self.version.clone()),
            ("options", self.options.clone()),
            ("inputs", self.inputs.clone()),
            ("target", self.target.clone()),
            ("shard_index", self.shard.index.to_string()),
            ("shard_count", self.shard.count.to_string()),
            ("total_units", self.total_units.to_string()),
            ("first_unit", self.first_unit.to_string()),
            ("units", self.units.to_string()),
            ("kind", self.kind.clone()),
            (
                "link_distributed",
                u8::from(self.link_distributed).to_string(),
            ),
            ("overflow_check", u8::from(self.overflow_check).to_string()),
        ]
    }

    /// The fields that must be equal in every part of one run, with their names.
    pub(crate) fn run_fields(&self) -> [(&'static str, String); 7] {
        [
            ("format", self.format.clone()),
            ("version", self.version.clone()),
            ("options", self.options.clone()),
            (
                "inputs",
                format!("{} (target {})", self.inputs, self.target),
            ),
            ("shard count", self.shard.count.to_string()),
            ("unit count", self.total_units.to_string()),
            ("kind", self.kind.clone()),
        ]
    }
}

/// `shard-IIIII-of-NNNNN.vis.part`.
pub fn part_name(shard: ShardSpec) -> String {
    format!(
        "shard-{:05}-of-{:05}{PART_SUFFIX}",
        shard.index, shard.count
    )
}

fn absolute(p: &Path) -> String {
    p.canonicalize()
        .unwrap_or_else(|_| p.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

/// FNV-1a (64 bits): stable across builds and platforms, unlike std's hasher; the fingerprint
/// guards against mixing runs by mistake, not against forgery.
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The inputs' hash: each (step, rank)'s folders, and the size and modification time of the
/// dump files in them (a dump rewritten between two shards changes it).
fn inputs_hash(opts: &ConvertOptions, folders: &[InputDirs]) -> String {
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    let mut text = |s: &str| {
        h.write(s.as_bytes());
        h.write(&[0]);
    };
    text(&absolute(&opts.target));
    text(&opts.golden.as_deref().map(absolute).unwrap_or_default());
    for job in folders {
        text(&format!("{} {}", job.step, job.rank));
        for dir in std::iter::once(job.target).chain(job.golden) {
            text(&absolute(dir));
            for name in ["dump.json", "construct.json", "stack.json"] {
                let stamp = std::fs::metadata(dir.join(name)).ok().map(|m| {
                    let mtime = m
                        .modified()
                        .ok()
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .map_or(0, |d| d.as_nanos());
                    (m.len(), mtime)
                });
                text(&format!("{name} {stamp:?}"));
            }
        }
    }
    format!("{:016x}", h.finish())
}

/// Adds the manifest (the completeness mark last, in the same transaction), flushes the file
/// and renames it to `dest`, replacing an older part of the same shard.
pub(crate) fn seal(path: &Path, manifest: &Manifest, dest: &Path) -> Result<(), ConvertError> {
    let sql = |e: rusqlite::Error| ConvertError::Input {
        path: path.to_path_buf(),
        message: format!("cannot add the part's manifest: {e}"),
    };
    let mut conn = Connection::open(path).map_err(sql)?;
    let tx = conn.transaction().map_err(sql)?;
    tx.execute_batch(&format!(
        "CREATE TABLE {MANIFEST_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
    ))
    .map_err(sql)?;
    {
        let mut insert = tx
            .prepare(&format!("INSERT INTO {MANIFEST_TABLE} VALUES (?1, ?2)"))
            .map_err(sql)?;
        for (k, v) in manifest.rows() {
            insert.execute((k, v)).map_err(sql)?;
        }
        insert.execute(("complete", "1")).map_err(sql)?;
    }
    tx.commit().map_err(sql)?;
    conn.close().map_err(|(_, e)| sql(e))?;
    let io = |source: std::io::Error| ConvertError::Input {
        path: path.to_path_buf(),
        message: format!("cannot finish the part: {source}"),
    };
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(io)?;
    std::fs::rename(path, dest).map_err(io)?;
    if let Some(dir) = dest.parent() {
        // The rename itself made durable (best effort: not every file system allows it).
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

/// Reads a part's manifest; an error naming the file when it is not a complete part of a
/// format this version reads.
pub(crate) fn read_manifest(path: &Path) -> Result<Manifest, ConvertError> {
    let bad = |message: String| ConvertError::Input {
        path: path.to_path_buf(),
        message,
    };
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| bad(format!("not a readable part: {e}")))?;
    let has_table: Option<String> = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [MANIFEST_TABLE],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| bad(format!("not a part (not a SQLite database?): {e}")))?;
    if has_table.is_none() {
        return Err(bad(
            "not a complete part: it has no manifest (a .vis.db, or a part whose task was \
             killed before it finished)"
                .into(),
        ));
    }
    let mut stmt = conn
        .prepare(&format!("SELECT key, value FROM {MANIFEST_TABLE}"))
        .map_err(|e| bad(e.to_string()))?;
    let rows: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .and_then(|rows| rows.collect())
        .map_err(|e| bad(format!("unreadable manifest: {e}")))?;
    let get = |key: &str| {
        rows.iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| bad(format!("the part's manifest has no {key:?}")))
    };
    if get("complete").ok().as_deref() != Some("1") {
        return Err(bad(
            "not a complete part: its completeness mark is missing".into()
        ));
    }
    let format = get("format")?;
    if format != FORMAT {
        return Err(bad(format!(
            "part format {format} (this graph-ascend {} reads format {FORMAT}): convert \
             the shards and gather with the same version",
            env!("CARGO_PKG_VERSION")
        )));
    }
    let num = |key: &str| -> Result<u64, ConvertError> {
        let v = get(key)?;
        v.parse()
            .map_err(|_| bad(format!("manifest {key} = {v:?} is not a number")))
    };
    let small = |key: &str| -> Result<u32, ConvertError> {
        u32::try_from(num(key)?).map_err(|_| bad(format!("manifest {key} is out of range")))
    };
    let shard = ShardSpec::new(small("shard_index")?, small("shard_count")?)
        .map_err(|e| bad(format!("manifest: {e}")))?;
    let m = Manifest {
        format,
        version: get("version")?,
        options: get("options")?,
        inputs: get("inputs")?,
        target: get("target")?,
        shard,
        total_units: num("total_units")?,
        first_unit: num("first_unit")?,
        units: num("units")?,
        kind: get("kind")?,
        link_distributed: get("link_distributed")? == "1",
        overflow_check: get("overflow_check")? == "1",
    };
    let expected = shard.units(usize::try_from(m.total_units).unwrap_or(usize::MAX));
    if (m.first_unit, m.units) != (expected.start as u64, expected.len() as u64) {
        return Err(bad(format!(
            "manifest: shard {shard} of {} units should hold units {expected:?}, it says {}..{}",
            m.total_units,
            m.first_unit,
            m.first_unit + m.units
        )));
    }
    Ok(m)
}
