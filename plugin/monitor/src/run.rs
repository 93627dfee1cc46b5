//! One monitor run on disk: which format it is, which ranks it has, and where each rank's data
//! is. A run is given as a folder (v1's `<time>-rank<R>-<uid>` folders or v2's `rank_<R>`
//! folders in it, or one such rank folder itself, or a folder holding one `*.trend.db`) or as a
//! `*.trend.db` file.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::MonitorError;

/// The three layouts msprobe 26.2 writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// `TrainerMon`'s CSVs: `<time>-rank<R>-<uid>/<prefix>_<start>-<end>.csv`.
    V1,
    /// `TrainerMonitorV2`'s CSVs: `rank_<R>/<kind>_step<a>-<b>.csv`.
    V2,
    /// `msprobe data2db`'s `*.trend.db` (SQLite).
    TrendDb,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::V1 => "v1 CSV",
            Format::V2 => "v2 CSV",
            Format::TrendDb => "trend.db",
        }
    }
}

/// A run: its format and, per rank, the folder (CSV) or the database (trend.db).
#[derive(Clone, Debug)]
pub struct Run {
    pub path: PathBuf,
    pub format: Format,
    pub ranks: BTreeMap<u32, PathBuf>,
}

/// msprobe's `OUTPUT_DIR_PATTERN` (`([\w-]{0,20})-rank(\d{1,5})-`, matched at the start): the
/// rank of a v1 rank folder's name.
pub fn v1_rank_of_dir(name: &str) -> Option<u32> {
    let bytes = name.as_bytes();
    // The time tag is at most 20 word characters or dashes; the longest one that lets the
    // rest match wins (a regex's backtracking gives the same rank: the digits must follow).
    let tag_len = bytes
        .iter()
        .take(21)
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_' || **b == b'-')
        .count()
        .min(20);
    (0..=tag_len).rev().find_map(|start| {
        let rest = name.get(start..)?.strip_prefix("-rank")?;
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if !(1..=5).contains(&digits) || rest.as_bytes().get(digits) != Some(&b'-') {
            return None;
        }
        rest[..digits].parse().ok()
    })
}

/// v2's rank folder `rank_<R>`.
pub fn v2_rank_of_dir(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("rank_")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn is_trend_db(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".trend.db"))
}

fn list_dir(dir: &Path) -> Result<Vec<(String, PathBuf)>, MonitorError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| MonitorError::io(dir, e))? {
        let entry = entry.map_err(|e| MonitorError::io(dir, e))?;
        if let Some(name) = entry.file_name().to_str() {
            out.push((name.to_string(), entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

impl Run {
    /// Finds the run at `path` (see the module's doc for what it may be).
    pub fn open(path: &Path) -> Result<Run, MonitorError> {
        let meta = std::fs::metadata(path).map_err(|e| MonitorError::io(path, e))?;
        if meta.is_file() {
            if is_trend_db(path) {
                return Run::trend_db(path);
            }
            return Err(MonitorError::NotARun {
                path: path.to_path_buf(),
            });
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if let Some(rank) = v1_rank_of_dir(name) {
            return Ok(Run::single(path, Format::V1, rank));
        }
        if let Some(rank) = v2_rank_of_dir(name) {
            return Ok(Run::single(path, Format::V2, rank));
        }
        let entries = list_dir(path)?;
        let mut v1 = BTreeMap::new();
        let mut v2 = BTreeMap::new();
        let mut dbs = Vec::new();
        for (name, p) in entries {
            if p.is_dir() {
                // Two folders of one rank (msprobe's `get_target_output_dir` keeps the last
                // listed): the later name, i.e. the later start time, is kept here too.
                if let Some(rank) = v1_rank_of_dir(&name) {
                    v1.insert(rank, p);
                } else if let Some(rank) = v2_rank_of_dir(&name) {
                    v2.insert(rank, p);
                }
            } else if is_trend_db(&p) {
                dbs.push(p);
            }
        }
        match (v1.is_empty(), v2.is_empty(), dbs.len()) {
            (false, true, _) => Ok(Run {
                path: path.to_path_buf(),
                format: Format::V1,
                ranks: v1,
            }),
            (true, false, _) => Ok(Run {
                path: path.to_path_buf(),
                format: Format::V2,
                ranks: v2,
            }),
            (false, false, _) => Err(MonitorError::format(
                path,
                "holds both v1 (`-rank<R>-`) and v2 (`rank_<R>`) folders: give one of them",
            )),
            (true, true, 1) => Run::trend_db(&dbs[0]),
            (true, true, 0) => Err(MonitorError::NotARun {
                path: path.to_path_buf(),
            }),
            (true, true, n) => Err(MonitorError::format(
                path,
                format!("holds {n} *.trend.db files: give one of them"),
            )),
        }
    }

    fn single(path: &Path, format: Format, rank: u32) -> Run {
        Run {
            path: path.to_path_buf(),
            format,
            ranks: BTreeMap::from([(rank, path.to_path_buf())]),
        }
    }

    fn trend_db(path: &Path) -> Result<Run, MonitorError> {
        let ranks = crate::trend_db::ranks(path)?;
        Ok(Run {
            path: path.to_path_buf(),
            format: Format::TrendDb,
            ranks: ranks.into_iter().map(|r| (r, path.to_path_buf())).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_folders_as_msprobe_matches_them() {
        assert_eq!(v1_rank_of_dir("Dec02_13-24-37-rank1-8fbdaf33"), Some(1));
        assert_eq!(v1_rank_of_dir("rank-rank12-x"), Some(12));
        assert_eq!(v1_rank_of_dir("-rank3-"), Some(3));
        assert_eq!(v1_rank_of_dir("Dec02_13-24-37-rank1"), None);
        assert_eq!(v1_rank_of_dir("a_very_long_time_tag_x-rank1-u"), None);
        assert_eq!(v1_rank_of_dir("t-rank123456-u"), None);
        assert_eq!(v2_rank_of_dir("rank_7"), Some(7));
        assert_eq!(v2_rank_of_dir("rank_"), None);
    }
}
