//! Paths from requests, resolved strictly inside the logdir.
//!
//! msprobe checked only the output path's containment and accepted `../` or absolute dump paths.
//! Here every path a request names (dump folders, layer-mapping file, output folder) must be
//! relative, free of `..`, and must still be inside the logdir once symlinks are resolved: a
//! symlink inside the logdir that points outside is refused like a `..`.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
