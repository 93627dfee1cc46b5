//! Where the readers may read: the one definition of "open a dump file".
//!
//! Every file a conversion reads (`dump.json`, `construct.json`, `stack.json`, tensors, a
//! layer-mapping YAML) is opened through [`Confine::open`]. The command line reads anywhere
//! ([`Confine::anywhere`]); the sidecar confines a conversion to its logdir
//! ([`Confine::under`]). A confined open checks the file it *opened*, not the name it was
//! given: on Linux the real path of the open descriptor (`/proc/self/fd/N`), so a symlink
//! swapped in after any earlier check of the folder still cannot lead outside. Where `/proc` is missing the name is resolved right after the open (a narrower
//! window, not none).

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::DumpError;

/// The folder every opened file must lie in, or none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confine {
    /// Canonical.
    root: Option<PathBuf>,
}

impl Confine {
    /// Files may be anywhere (the command line: the user names what to read).
    pub fn anywhere() -> Confine {
        Confine { root: None }
    }

    /// Files must resolve inside `root` (which must exist).
    pub fn under(root: &Path) -> Result<Confine, DumpError> {
        let root = root.canonicalize().map_err(|source| DumpError::Io {
            path: root.to_path_buf(),
            source,
        })?;
        Ok(Confine { root: Some(root) })
    }

    /// The folder files must be in (canonical), if any.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// Opens `path` for reading; when confined, the opened file must resolve inside the root.
    pub fn open(&self, path: &Path) -> Result<File, DumpError> {
        let file = File::open(path).map_err(|source| DumpError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if let Some(root) = &self.root {
            let real = opened_path(&file, path).map_err(|source| DumpError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            if !real.starts_with(root) {
                return Err(DumpError::Outside {
                    path: path.to_path_buf(),
                    real,
                    root: root.clone(),
                });
            }
        }
        Ok(file)
    }

    /// Reads the whole of `path` (opened by [`Confine::open`]).
    pub fn read(&self, path: &Path) -> Result<Vec<u8>, DumpError> {
        let mut file = self.open(path)?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).map_err(|source| DumpError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(bytes)
    }
}

/// The real path of an open file: what its descriptor refers to.
fn opened_path(file: &File, path: &Path) -> std::io::Result<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        if let Ok(real) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
            return Ok(real);
        }
    }
    let _ = file;
    path.canonicalize()
}

/// What a file that is not a regular one is, in words ("a FIFO", "a folder"...), for the messages
/// that refuse it.
pub fn file_kind(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "not a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a link inside the root that leads outside is refused
    /// when the file is opened, whatever was checked before; links that stay inside are fine.
    #[test]
    fn an_opened_file_must_resolve_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("logdir");
        std::fs::create_dir_all(root.join("rank0")).unwrap();
        let secret = dir.path().join("secret.json");
        std::fs::write(&secret, "{}").unwrap();
        std::fs::write(root.join("rank0/stack.json"), "{}").unwrap();
        let dump = root.join("rank0/dump.json");
        std::os::unix::fs::symlink(root.join("rank0/stack.json"), &dump).unwrap();
        let confine = Confine::under(&root).unwrap();
        assert_eq!(confine.read(&dump).unwrap(), b"{}");
        // Swapped for a link to outside (as after a check of the folder).
        std::fs::remove_file(&dump).unwrap();
        std::os::unix::fs::symlink(&secret, &dump).unwrap();
        let err = confine.read(&dump).unwrap_err().to_string();
        assert!(
            err.contains("dump.json") && err.contains("outside"),
            "{err}"
        );
        // A folder on the way that is a link to outside is the same.
        std::os::unix::fs::symlink(dir.path(), root.join("up")).unwrap();
        assert!(confine.read(&root.join("up/secret.json")).is_err());
        // Unconfined, the same files are read.
        assert_eq!(Confine::anywhere().read(&dump).unwrap(), b"{}");
    }
}
