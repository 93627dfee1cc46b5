//! Writing a new output file whole or not at all, never replacing one (the report's HTML,
//! diagnose's dump config).
use std::io::Write;
use std::path::Path;

use anyhow::Context;

/// Writes a new file whole or not at all: into a temporary file beside it (tagged with this
/// process, named `…<temp_suffix>`, removed on Ctrl-C or SIGTERM, and by the next output into
/// that folder when this one was killed outright), then renamed to `path` without replacing
/// anything: one that exists is an error (also when it appeared since a check at the start).
/// The file gets the mode of any new file (0666 less the umask). `halfway` runs once the first
/// half of `bytes` is written (the report's tests stop there).
pub fn write_new(
    path: &Path,
    bytes: &[u8],
    temp_suffix: &str,
    halfway: impl FnOnce(&std::fs::File) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let cannot_write = || format!("cannot write {}", path.display());
    let mut out = graph_ascend_visdb::files::output_temp_in(dir, temp_suffix)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    let temp = out.path().to_path_buf();
    crate::interrupt::remove_on_signal(&temp);
    let written = (|| {
        let half = bytes.len() / 2;
        out.write_all(&bytes[..half])?;
        halfway(out.as_file())?;
        out.write_all(&bytes[half..])?;
        out.as_file().sync_all()
    })();
    let placed = written.with_context(cannot_write).and_then(|()| {
        out.into_temp_path().persist_noclobber(path).map_err(|e| {
            if e.error.kind() == std::io::ErrorKind::AlreadyExists {
                anyhow::anyhow!(
                    "cannot create {}: it exists (graph-ascend never replaces a file)",
                    path.display()
                )
            } else {
                anyhow::Error::new(e.error).context(cannot_write())
            }
        })
    });
    crate::interrupt::forget(&temp);
    placed
}
