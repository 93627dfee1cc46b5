//! Which dump folders to read: msprobe's directory classification and rank/step discovery.
//!
//! A path is one rank folder (`FILES`: holds dump.json…), a step folder of ranks (`RANKS`:
//! `rankN/` or a single `proc<pid>/`), or a folder of steps (`STEPS`: `stepN/`). Compare needs
//! the same kind on both sides and uses the ranks and steps present on both.

use std::path::{Path, PathBuf};

use crate::error::ConvertError;

/// msprobe's directory kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Files,
    Ranks,
    Steps,
}

fn entries(dir: &Path) -> Result<Vec<(String, bool)>, ConvertError> {
    let rd = std::fs::read_dir(dir).map_err(|e| ConvertError::Input {
        path: dir.to_path_buf(),
        message: format!("cannot read the folder: {e}"),
    })?;
    let mut out = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let is_dir = e.path().is_dir();
        out.push((name, is_dir));
    }
    out.sort();
    Ok(out)
}

/// `check_directory_content`.
pub fn classify(dir: &Path) -> Result<Layout, ConvertError> {
    if !dir.is_dir() {
        return Err(ConvertError::Input {
            path: dir.to_path_buf(),
            message: "no such folder".into(),
        });
    }
    let list = entries(dir)?;
    let bad = |m: &str| ConvertError::Input {
        path: dir.to_path_buf(),
        message: m.to_string(),
    };
    if list.is_empty() {
        return Err(bad("the folder is empty"));
    }
    if list.iter().any(|(n, _)| n == "dump_tensor_data") || list.iter().all(|(_, d)| !d) {
        return Ok(Layout::Files);
    }
    let dirs: Vec<&str> = list
        .iter()
        .filter(|(_, d)| *d)
        .map(|(n, _)| n.as_str())
        .collect();
    if dirs == ["rank"] || dirs.iter().any(|n| is_proc(n)) {
        return Ok(Layout::Ranks);
    }
    if dirs.iter().all(|n| numbered(n, "rank").is_some()) {
        return Ok(Layout::Ranks);
    }
    if dirs.iter().all(|n| numbered(n, "step").is_some()) {
        return Ok(Layout::Steps);
    }
    Err(bad(
        "not a dump folder: expected dump.json/construct.json/stack.json, rankN/ (or proc<pid>/) \
         folders, or stepN/ folders",
    ))
}

fn is_proc(name: &str) -> bool {
    name.strip_prefix("proc")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// `Some(n)` for `prefix`, `prefix0`, `prefix12` (no leading zeros), as msprobe accepts.
fn numbered(name: &str, prefix: &str) -> Option<i64> {
    let rest = name.strip_prefix(prefix)?;
    if rest.is_empty() {
        return Some(0);
    }
    if !rest.bytes().all(|b| b.is_ascii_digit()) || (rest.len() > 1 && rest.starts_with('0')) {
        return None;
    }
    rest.parse().ok()
}

/// `(rank, folder)` of a step folder, sorted by rank.
pub fn ranks(dir: &Path) -> Result<Vec<(i64, PathBuf)>, ConvertError> {
    let list = entries(dir)?;
    let mut out: Vec<(i64, PathBuf)> = list
        .iter()
        .filter(|(_, d)| *d)
        .filter_map(|(n, _)| numbered(n, "rank").map(|r| (r, dir.join(n))))
        .collect();
    if out.is_empty() {
        let procs: Vec<&String> = list
            .iter()
            .filter(|(n, d)| *d && is_proc(n))
            .map(|(n, _)| n)
            .collect();
        match procs.as_slice() {
            [one] => out.push((0, dir.join(one))),
            _ => {
                return Err(ConvertError::Input {
                    path: dir.to_path_buf(),
                    message: "expected rankN/ folders or exactly one proc<pid>/ folder".into(),
                })
            }
        }
    }
    out.sort_by_key(|(r, _)| *r);
    Ok(out)
}

/// `(step, folder)` of a steps folder, sorted by step.
pub fn steps(dir: &Path) -> Result<Vec<(i64, PathBuf)>, ConvertError> {
    let mut out: Vec<(i64, PathBuf)> = entries(dir)?
        .iter()
        .filter(|(_, d)| *d)
        .filter_map(|(n, _)| numbered(n, "step").map(|s| (s, dir.join(n))))
        .collect();
    out.sort_by_key(|(s, _)| *s);
    Ok(out)
}

/// The layout of `target`, checked to be `golden`'s too.
pub fn classify_both(target: &Path, golden: Option<&Path>) -> Result<Layout, ConvertError> {
    let layout = classify(target)?;
    if let Some(g) = golden {
        if classify(g)? != layout {
            return Err(ConvertError::Usage(format!(
                "the directory structures of {} and {} are inconsistent",
                target.display(),
                g.display()
            )));
        }
    }
    Ok(layout)
}

/// A numbered folder of the target and, in a compare, the golden's of the same number.
pub type FolderPair = (i64, PathBuf, Option<PathBuf>);

/// The step folders of a steps folder: every target step, or in a compare the steps that
/// both sides have (an error when there is none).
pub fn common_steps(target: &Path, golden: Option<&Path>) -> Result<Vec<FolderPair>, ConvertError> {
    let golden = match golden {
        Some(g) => Some(steps(g)?),
        None => None,
    };
    let mut out = Vec::new();
    for (step, target) in steps(target)? {
        let golden = match &golden {
            None => None,
            Some(gs) => match gs.iter().find(|(s, _)| *s == step) {
                Some((_, d)) => Some(d.clone()),
                None => continue,
            },
        };
        out.push((step, target, golden));
    }
    if out.is_empty() {
        return Err(ConvertError::Usage(
            "no step in common between the two dumps".into(),
        ));
    }
    Ok(out)
}

/// The rank folders of a step folder: every target rank, or in a compare the ranks both sides
/// have (an error when there is none).
pub fn common_ranks(target: &Path, golden: Option<&Path>) -> Result<Vec<FolderPair>, ConvertError> {
    let target_ranks = ranks(target)?;
    let Some(g) = golden else {
        return Ok(target_ranks
            .into_iter()
            .map(|(r, p)| (r, p, None))
            .collect());
    };
    let golden_ranks = ranks(g)?;
    let both: Vec<FolderPair> = target_ranks
        .into_iter()
        .filter_map(|(r, p)| {
            golden_ranks
                .iter()
                .find(|(r2, _)| *r2 == r)
                .map(|(_, gp)| (r, p, Some(gp.clone())))
        })
        .collect();
    if both.is_empty() {
        return Err(ConvertError::Usage(format!(
            "{} and {} have no rank in common",
            target.display(),
            g.display()
        )));
    }
    Ok(both)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering_rules() {
        assert_eq!(numbered("rank", "rank"), Some(0));
        assert_eq!(numbered("rank12", "rank"), Some(12));
        assert_eq!(numbered("rank01", "rank"), None);
        assert_eq!(numbered("rankx", "rank"), None);
        assert!(is_proc("proc123"));
        assert!(!is_proc("process"));
    }
}
