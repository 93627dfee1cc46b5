//! Paths from requests, resolved strictly inside the logdir.
//!
//! msprobe checked only the output path's containment and accepted `../` or absolute dump paths.
//! Here every path a request names (dump folders, layer-mapping file, output folder) must be
//! relative, free of `..`, and must still be inside the logdir once symlinks are resolved: a
//! symlink inside the logdir that points outside is refused like a `..`. The folders a
//! conversion reads are then walked whole ([`check_tree`]): a `dump.json`, `stack.json` or
//! tensor file inside an accepted folder that is a symlink to a file outside is refused too,
//! since the converter opens those files by name.

use std::path::{Component, Path, PathBuf};

/// Longest accepted path, as msprobe.
const MAX_PATH_LEN: usize = 4096;

/// Why a path from a request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("{field}: the path is empty")]
    Empty { field: &'static str },
    #[error("{field}: {path:?} must be relative to the logdir, without '..'")]
    NotRelative { field: &'static str, path: String },
    #[error("{field}: {path:?} resolves outside the logdir")]
    Escapes { field: &'static str, path: String },
    #[error("{field}: {path:?} does not exist")]
    Missing { field: &'static str, path: String },
    #[error(
        "{field}: {path:?} is a symbolic link that resolves outside the logdir; conversions \
         started from the page read only files inside it"
    )]
    LinkEscapes { field: &'static str, path: String },
    #[error("{field}: {path:?} holds more than {max} files and folders")]
    TooMany {
        field: &'static str,
        path: String,
        max: usize,
    },
    #[error("{field}: {path:?} is not a {kind}")]
    WrongKind {
        field: &'static str,
        path: String,
        kind: &'static str,
    },
}

/// What the resolved path must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An existing folder.
    Dir,
    /// An existing regular file.
    File,
    /// A folder that may not exist yet (created on use); what exists of it must be inside.
    NewDir,
}

fn lexical_check(field: &'static str, rel: &str) -> Result<(), PathError> {
    if rel.trim().is_empty() {
        return Err(PathError::Empty { field });
    }
    let not_relative = || PathError::NotRelative {
        field,
        path: rel.to_owned(),
    };
    if rel.len() > MAX_PATH_LEN || rel.contains('\0') {
        return Err(not_relative());
    }
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            _ => return Err(not_relative()),
        }
    }
    Ok(())
}

/// Resolves `rel` (from field `field` of a request) under `logdir`.
pub fn resolve(
    logdir: &Path,
    field: &'static str,
    rel: &str,
    kind: Kind,
) -> Result<PathBuf, PathError> {
    lexical_check(field, rel)?;
    let escapes = || PathError::Escapes {
        field,
        path: rel.to_owned(),
    };
    let root = logdir.canonicalize().map_err(|_| PathError::Missing {
        field,
        path: logdir.display().to_string(),
    })?;
    let joined = root.join(rel);
    match kind {
        Kind::Dir | Kind::File => {
            let real = joined.canonicalize().map_err(|_| PathError::Missing {
                field,
                path: rel.to_owned(),
            })?;
            if !real.starts_with(&root) {
                return Err(escapes());
            }
            let ok = match kind {
                Kind::Dir => real.is_dir(),
                _ => real.is_file(),
            };
            if !ok {
                return Err(PathError::WrongKind {
                    field,
                    path: rel.to_owned(),
                    kind: if kind == Kind::Dir { "folder" } else { "file" },
                });
            }
            Ok(real)
        }
        Kind::NewDir => {
            // The deepest part that exists must resolve inside; the rest is created later as
            // plain folders (no component can be a symlink because it does not exist yet).
            let mut existing = joined.clone();
            let mut rest: Vec<std::ffi::OsString> = Vec::new();
            while std::fs::symlink_metadata(&existing).is_err() {
                match (existing.file_name(), existing.parent()) {
                    (Some(name), Some(parent)) => {
                        rest.push(name.to_owned());
                        existing = parent.to_path_buf();
                    }
                    _ => return Err(escapes()),
                }
            }
            let real = existing.canonicalize().map_err(|_| escapes())?;
            if !real.starts_with(&root) {
                return Err(escapes());
            }
            if !real.is_dir() {
                return Err(PathError::WrongKind {
                    field,
                    path: rel.to_owned(),
                    kind: "folder",
                });
            }
            let mut out = real;
            for name in rest.into_iter().rev() {
                out.push(name);
            }
            Ok(out)
        }
    }
}

/// Most files and folders [`check_tree`] visits under one folder (a tensor dump of a large
/// model has a few hundred thousand files).
pub const MAX_TREE_ENTRIES: usize = 2_000_000;

/// Checks that everything under `dir` (a folder [`resolve`]d from field `field`, `rel` in the
/// request) resolves inside `logdir`: every symlink among its files and folders, at any depth,
/// must point inside, and folders reached through a link are walked too (once each, so a
/// link cycle ends). Dangling links are left alone: the converter cannot read them.
///
/// The check runs before the conversion starts, so that a bad folder is refused at once with
/// the field's name; a link swapped in afterwards is refused by the converter itself when it
/// opens the file (`ConvertOptions.confine`, [`graph_ascend_dump::Confine`]).
pub fn check_tree(
    logdir: &Path,
    field: &'static str,
    rel: &str,
    dir: &Path,
) -> Result<(), PathError> {
    let root = logdir.canonicalize().map_err(|_| PathError::Missing {
        field,
        path: logdir.display().to_string(),
    })?;
    let shown = |p: &Path| {
        p.strip_prefix(&root)
            .map_or_else(|_| p.display().to_string(), |r| r.display().to_string())
    };
    let mut seen = std::collections::HashSet::new();
    let mut pending = vec![dir.to_path_buf()];
    let mut entries = 0usize;
    while let Some(folder) = pending.pop() {
        let Ok(real) = folder.canonicalize() else {
            continue;
        };
        if !seen.insert(real) {
            continue;
        }
        let Ok(listing) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in listing.flatten() {
            entries += 1;
            if entries > MAX_TREE_ENTRIES {
                return Err(PathError::TooMany {
                    field,
                    path: rel.to_owned(),
                    max: MAX_TREE_ENTRIES,
                });
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() {
                let Ok(target) = path.canonicalize() else {
                    continue;
                };
                if !target.starts_with(&root) {
                    return Err(PathError::LinkEscapes {
                        field,
                        path: shown(&path),
                    });
                }
                if target.is_dir() {
                    pending.push(path);
                }
            } else if kind.is_dir() {
                pending.push(path);
            }
        }
    }
    Ok(())
}

/// `text` (an error message) with the logdir's absolute path taken out of every path in it:
/// `/srv/logs/dumps/rank0/dump.json` → `dumps/rank0/dump.json`, the logdir itself → `.`. The
/// page shows paths relative to the logdir, as its forms take them; the server's own folders
/// are not the browser's business.
pub fn relative_text(logdir: &Path, text: &str) -> String {
    let mut out = text.to_owned();
    let canonical = logdir.canonicalize().ok();
    for root in canonical.iter().map(PathBuf::as_path).chain([logdir]) {
        let root = root.to_string_lossy();
        let root = root.trim_end_matches('/');
        if root.is_empty() {
            continue;
        }
        out = without_root(&out, root);
    }
    out
}

/// `text` with `root` removed where it starts a path: `root/x` → `x`, `root` alone → `.`;
/// left alone where it is only the start of a longer name (`root2/x`).
fn without_root(text: &str, root: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(root) {
        let after = &rest[at + root.len()..];
        out.push_str(&rest[..at]);
        match after.chars().next() {
            Some('/') => rest = &after[1..],
            Some(c) if c.is_alphanumeric() || matches!(c, '_' | '-' | '.') => {
                out.push_str(root);
                rest = after;
            }
            _ => {
                out.push('.');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_paths_relative_to_the_logdir() {
        let dir = tempfile::tempdir().expect("tempdir");
        let logdir = dir.path().join("logdir");
        std::fs::create_dir_all(&logdir).expect("mkdir");
        let abs = logdir.display().to_string();
        let text = format!(
            "cannot read {abs}/dumps/rank0/dump.json: missing; under {abs}; beside {abs}2/x"
        );
        assert_eq!(
            relative_text(&logdir, &text),
            format!("cannot read dumps/rank0/dump.json: missing; under .; beside {abs}2/x")
        );
    }

    #[test]
    fn escapes_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let logdir = dir.path().join("logdir");
        std::fs::create_dir_all(logdir.join("dump/step0")).expect("mkdir");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::os::unix::fs::symlink(&outside, logdir.join("link")).expect("symlink");

        assert!(resolve(&logdir, "npu_path", "dump/step0", Kind::Dir).is_ok());
        assert!(matches!(
            resolve(&logdir, "npu_path", "../outside", Kind::Dir),
            Err(PathError::NotRelative { .. })
        ));
        assert!(matches!(
            resolve(&logdir, "npu_path", "/tmp", Kind::Dir),
            Err(PathError::NotRelative { .. })
        ));
        assert!(matches!(
            resolve(&logdir, "npu_path", "link", Kind::Dir),
            Err(PathError::Escapes { .. })
        ));
        assert!(matches!(
            resolve(&logdir, "output_path", "link/new", Kind::NewDir),
            Err(PathError::Escapes { .. })
        ));
        assert!(matches!(
            resolve(&logdir, "npu_path", "nope", Kind::Dir),
            Err(PathError::Missing { .. })
        ));
        let out = resolve(&logdir, "output_path", "a/b", Kind::NewDir).expect("new dir");
        assert!(out.ends_with("logdir/a/b"));
        assert!(matches!(
            resolve(&logdir, "output_path", "", Kind::NewDir),
            Err(PathError::Empty { .. })
        ));
    }

    /// Regression: a file inside an accepted dump folder that links
    /// outside the logdir was read by the conversion.
    #[test]
    fn links_inside_a_folder_must_stay_inside() {
        let dir = tempfile::tempdir().expect("tempdir");
        let logdir = dir.path().join("logdir");
        let rank = logdir.join("dump/step0/rank0");
        std::fs::create_dir_all(rank.join("dump_tensor_data")).expect("mkdir");
        std::fs::write(rank.join("construct.json"), "{}").expect("write");
        std::fs::write(logdir.join("shared.json"), "{}").expect("write");
        let secret = dir.path().join("secret.json");
        std::fs::write(&secret, "{}").expect("write");
        // Links that stay inside are fine, and so is a cycle.
        std::os::unix::fs::symlink(logdir.join("shared.json"), rank.join("stack.json"))
            .expect("symlink");
        std::os::unix::fs::symlink(logdir.join("dump"), rank.join("loop")).expect("symlink");
        std::os::unix::fs::symlink(dir.path().join("gone"), rank.join("dangling"))
            .expect("symlink");
        let folder = resolve(&logdir, "npu_path", "dump", Kind::Dir).expect("resolves");
        assert_eq!(check_tree(&logdir, "npu_path", "dump", &folder), Ok(()));

        let tensor = rank.join("dump_tensor_data/Functional.relu.0.forward.input.0.pt");
        std::os::unix::fs::symlink(&secret, &tensor).expect("symlink");
        let err = check_tree(&logdir, "npu_path", "dump", &folder).expect_err("escapes");
        assert_eq!(
            err,
            PathError::LinkEscapes {
                field: "npu_path",
                path: "dump/step0/rank0/dump_tensor_data/Functional.relu.0.forward.input.0.pt"
                    .into()
            }
        );
        assert!(err.to_string().contains("outside the logdir"), "{err}");
        std::fs::remove_file(&tensor).expect("rm");

        // A linked folder inside the logdir is walked: its own links count.
        let other = logdir.join("other");
        std::fs::create_dir_all(&other).expect("mkdir");
        std::os::unix::fs::symlink(&secret, other.join("dump.json")).expect("symlink");
        std::os::unix::fs::symlink(&other, rank.join("more")).expect("symlink");
        let err = check_tree(&logdir, "npu_path", "dump", &folder).expect_err("escapes");
        assert!(matches!(err, PathError::LinkEscapes { .. }), "{err}");
    }
}
