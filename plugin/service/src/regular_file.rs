//! Reading a small file that a request names (a matching configuration): opened once, checked on
//! the handle that is read, read with a bound.
//!
//! Checking a path and then opening it by name leaves a window in which another user of the
//! folder can swap in a FIFO (the open, and then the read, wait for a writer forever: the request
//! went unanswered and its thread was lost) or a link to a file elsewhere. Here the file is opened
//! once with `O_NOFOLLOW` (a link is refused, not followed) and `O_NONBLOCK` (opening a FIFO
//! returns at once); what the handle is (`fstat`) decides whether it is read; a regular file is
//! read up to a bound, and one past it is refused before its text is held.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use graph_ascend_dump::confine::file_kind;

/// Why [`read_regular`] did not read a file. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{} does not exist", path.display())]
    Missing { path: PathBuf },
    #[error("{} is a symbolic link, which is not followed", path.display())]
    Link { path: PathBuf },
    #[error("{} cannot be opened: {source}", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a regular file (it is {kind})", path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{} is larger than {max} bytes", path.display())]
    TooBig { path: PathBuf, max: u64 },
    #[error("{} cannot be read: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not UTF-8 text", path.display())]
    NotText { path: PathBuf },
}

/// The text of the regular file at `path` (never a link, FIFO, device or folder), at most
/// `max_bytes` long; opened once, without blocking, and checked on the open handle.
pub fn read_regular(path: &Path, max_bytes: u64) -> Result<String, ReadError> {
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file: File = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ReadError::Missing {
                path: path.to_owned(),
            })
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(ReadError::Link {
                path: path.to_owned(),
            })
        }
        Err(source) => {
            return Err(ReadError::Open {
                path: path.to_owned(),
                source,
            })
        }
    };
    let read_err = |source| ReadError::Read {
        path: path.to_owned(),
        source,
    };
    let meta = file.metadata().map_err(read_err)?;
    if !meta.file_type().is_file() {
        return Err(ReadError::NotRegular {
            path: path.to_owned(),
            kind: file_kind(meta.file_type()),
        });
    }
    let too_big = || ReadError::TooBig {
        path: path.to_owned(),
        max: max_bytes,
    };
    if meta.len() > max_bytes {
        return Err(too_big());
    }
    // The size may still grow while it is read: the read itself is bounded too.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_big());
    }
    String::from_utf8(bytes).map_err(|_| ReadError::NotText {
        path: path.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO with no writer: reading it by name would wait forever; here it is refused at once
    /// (were it opened blocking, this test would hang).
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("pairs.vis.config");
        graph_ascend_testkit::special_files::make_fifo(&fifo);
        let err = read_regular(&fifo, 1024).expect_err("a FIFO");
        assert!(
            matches!(err, ReadError::NotRegular { kind: "a FIFO", .. }),
            "{err}"
        );
        assert!(
            err.to_string().contains(&fifo.display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn links_big_files_and_missing_ones_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("a.vis.config");
        std::fs::write(&file, "{\"a\": \"b\"}").expect("write");
        assert_eq!(read_regular(&file, 64).expect("read"), "{\"a\": \"b\"}");
        let link = dir.path().join("link.vis.config");
        std::os::unix::fs::symlink(&file, &link).expect("symlink");
        assert!(matches!(
            read_regular(&link, 64),
            Err(ReadError::Link { .. })
        ));
        assert!(matches!(
            read_regular(&file, 4),
            Err(ReadError::TooBig { max: 4, .. })
        ));
        let gone = dir.path().join("gone.vis.config");
        let err = read_regular(&gone, 64).expect_err("missing");
        assert!(matches!(err, ReadError::Missing { .. }));
        assert!(err.to_string().contains("gone.vis.config"));
        assert!(matches!(
            read_regular(dir.path(), 64),
            Err(ReadError::NotRegular {
                kind: "a folder",
                ..
            })
        ));
    }
}
