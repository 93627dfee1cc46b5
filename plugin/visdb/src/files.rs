//! Putting finished files in place: whole or not at all, and never over another file unasked.
//!
//! Every file the project writes for others to read (a `.vis.db`, a matching-edit JSON, the
//! sidecar's address file) is written to a temporary file in the destination's folder and
//! then renamed, so a reader never sees half a file. New outputs also refuse to replace a file
//! of the same name: the rename is the kernel's no-replace rename (a hard link and an unlink
//! where that is missing, see [`tempfile::TempPath::persist_noclobber`]), and a taken name
//! moves on to the next free one (`compare_20260101120000_2.vis.db`, `_3`, …).

use std::io::Write;
use std::path::{Path, PathBuf};

use tempfile::TempPath;

/// How many numbered names [`persist_new`] tries after `dest` itself.
const MAX_SUFFIX: u32 = 999;

/// Replaces `path` with `text`, whole: written to a temporary file beside it, flushed to disk,
/// then renamed over it (for files that are meant to be replaced: edits, address files). The
/// file gets the mode of any new file (0666 less the process umask, 0644 under the usual 022),
/// not a temporary file's private 0600: colleagues sharing a logdir load saved `.vis.config`s too.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut builder = tempfile::Builder::new();
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let mut tmp = builder.tempfile_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A temporary file in `dir` for an output that is renamed into place once complete (a CSV, a
/// report): named with this process's tag (`.graph-ascend-<host>.<pid>.XXXXXX<suffix>`, see
/// [`crate::stale`]), so that what a killed writer left is removed by the next output into that
/// folder (done here first) and by the catalog's walk of a logdir, and with the mode of any new
/// file (0666 less the umask), not a temporary file's private 0600.
pub fn output_temp_in(dir: &Path, suffix: &str) -> std::io::Result<tempfile::NamedTempFile> {
    crate::stale::remove_stale(dir, crate::stale::TEMP_PREFIX);
    let prefix = format!(
        "{}{}.",
        crate::stale::TEMP_PREFIX,
        crate::stale::owner_tag()
    );
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(suffix);
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    builder.tempfile_in(dir)
}

/// Moves the finished temporary file `temp` to `dest`, or when a file of that name exists (an
/// older output, or another conversion finishing in the same second) to the first free name of
/// `dest` numbered `_2`, `_3`, … before its extensions. Returns the name taken; never replaces a
/// file. On error `temp` is removed.
pub fn persist_new(temp: TempPath, dest: &Path) -> std::io::Result<PathBuf> {
    let mut temp = temp;
    for n in 1..=MAX_SUFFIX + 1 {
        let name = numbered(dest, n);
        match temp.persist_noclobber(&name) {
            Ok(()) => return Ok(name),
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => temp = e.path,
            Err(e) => return Err(e.error),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!(
            "{} and its {MAX_SUFFIX} numbered variants already exist",
            dest.display()
        ),
    ))
}

/// `dest` itself for `n = 1`, else `dest` with `_n` before the first `.` of its file name
/// (`compare_20260101120000.vis.db` → `compare_20260101120000_2.vis.db`).
fn numbered(dest: &Path, n: u32) -> PathBuf {
    if n <= 1 {
        return dest.to_path_buf();
    }
    let name = dest
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (stem, ext) = match name.get(1..).and_then(|rest| rest.find('.')) {
        Some(dot) => name.split_at(dot + 1),
        None => (name.as_str(), ""),
    };
    dest.with_file_name(format!("{stem}_{n}{ext}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replaced file has the mode of any file the process creates (0644 under umask 022), not
    /// a temporary file's 0600, so colleagues on a shared server can read it.
    #[cfg(unix)]
    #[test]
    fn written_files_get_the_usual_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let plain = dir.path().join("plain");
        std::fs::File::create(&plain).expect("create");
        let saved = dir.path().join("a_0_0.vis.config");
        write_atomically(&saved, "{}").expect("write");
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&saved), mode(&plain));
        assert_eq!(std::fs::read_to_string(&saved).expect("read"), "{}");
    }

    /// Regression (issue 42): `export-csv -o` wrote mode 0600 where the other outputs follow
    /// the umask; its temporary files carried no owner tag, so a killed run's stayed forever.
    #[cfg(unix)]
    #[test]
    fn output_temporaries_are_tagged_follow_the_umask_and_clean_dead_ones() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let plain = dir.path().join("plain");
        std::fs::File::create(&plain).expect("create");
        let dead = dir.path().join(format!(
            "{}{}.abc123.csv.tmp",
            crate::stale::TEMP_PREFIX,
            crate::stale::dead_owner_tag()
        ));
        std::fs::write(&dead, "half a CSV").expect("write");
        let temp = output_temp_in(dir.path(), ".csv.tmp").expect("temp");
        let name = temp
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name");
        assert!(
            name.starts_with(&format!(
                "{}{}.",
                crate::stale::TEMP_PREFIX,
                crate::stale::owner_tag()
            )) && name.ends_with(".csv.tmp"),
            "{name}"
        );
        assert!(!crate::stale::is_stale(name, crate::stale::TEMP_PREFIX));
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(temp.path()), mode(&plain));
        assert!(
            !dead.exists() || crate::stale::owner_tag().starts_with("unknown-host"),
            "a dead writer's temporary file is removed"
        );
    }

    fn temp_with(dir: &Path, text: &str) -> TempPath {
        let mut f = tempfile::NamedTempFile::new_in(dir).unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f.into_temp_path()
    }

    #[test]
    fn numbered_names_keep_the_extensions() {
        let d = Path::new("/out/compare_20260101120000.vis.db");
        assert_eq!(numbered(d, 1), d);
        assert_eq!(
            numbered(d, 2),
            Path::new("/out/compare_20260101120000_2.vis.db")
        );
        assert_eq!(numbered(Path::new("a"), 3), Path::new("a_3"));
        assert_eq!(numbered(Path::new(".hidden"), 2), Path::new(".hidden_2"));
    }

    #[test]
    fn a_taken_name_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("build_1.vis.db");
        std::fs::write(&dest, "older").unwrap();
        let first = persist_new(temp_with(dir.path(), "one"), &dest).unwrap();
        let second = persist_new(temp_with(dir.path(), "two"), &dest).unwrap();
        assert_eq!(first, dir.path().join("build_1_2.vis.db"));
        assert_eq!(second, dir.path().join("build_1_3.vis.db"));
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "older");
        assert_eq!(std::fs::read_to_string(&first).unwrap(), "one");
        assert_eq!(std::fs::read_to_string(&second).unwrap(), "two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    }

    #[test]
    fn write_atomically_replaces_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("edits.json");
        write_atomically(&path, "first").unwrap();
        write_atomically(&path, "second").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
