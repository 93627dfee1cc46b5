//! Temporary names that say who made them, so that the leftovers of a killed process can be
//! cleaned without ever touching a live one.
//!
//! A `.vis.db` is written to a temporary file beside its destination (with, for a large one, its
//! index runs in another: `.graph-ascend-<host>.<pid>.….index.tmp`), a conversion in the
//! sidecar works in a staging folder, and the sidecar's socket lives in a private folder. A
//! process killed mid-way leaves these behind. A logdir is often shared storage written by
//! several hosts, so a process id alone proves nothing there: every such name carries the host
//! and the process id (`<prefix><host>.<pid>.<rest>`), and an entry is stale only when its host
//! is this host and no process of that id exists here. Names without that tag (older versions)
//! and entries of other hosts are never removed: their owner cannot be proven dead.

use std::path::Path;
use std::sync::OnceLock;

/// Prefix of the temporary `.vis.db` files beside a destination.
pub const TEMP_PREFIX: &str = ".graph-ascend-";
/// Prefix of the staging folders a conversion in the sidecar writes into, under its output
/// folder: `<prefix><host>.<pid>.<job id>`, so that those of a killed sidecar are found and
/// removed (by the next conversion into that folder and by the catalog's walk).
pub const STAGING_PREFIX: &str = ".graph-ascend-staging-";
/// Suffix of the temporary `.vis.db` files.
pub const TEMP_SUFFIX: &str = ".vis.db.tmp";
/// Suffix of the bulk writer's temporary index runs (`bulk/spill.rs`), beside the `.vis.db`
/// temporary file and with the same prefix and tag, so cleaned with it.
pub const INDEX_TEMP_SUFFIX: &str = ".index.tmp";

/// Longest host part kept in a name (socket paths must stay under 108 bytes).
const MAX_HOST_CHARS: usize = 32;

/// This host's name as it appears in names: letters, digits, `-` and `_` only (dots would make
/// the tag ambiguous). `None` when the name is unknown: then nothing is ever cleaned.
fn host() -> Option<&'static str> {
    static HOST: OnceLock<Option<String>> = OnceLock::new();
    HOST.get_or_init(|| {
        let raw = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
        let safe: String = raw
            .trim()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(MAX_HOST_CHARS)
            .collect();
        (!safe.is_empty()).then_some(safe)
    })
    .as_deref()
}

/// `<host>.<pid>`: the tag this process puts after a prefix.
pub fn owner_tag() -> String {
    format!(
        "{}.{}",
        host().unwrap_or("unknown-host"),
        std::process::id()
    )
}

/// The tag of a process of this host that cannot exist (its id is above the kernel's maximum):
/// what a killed process's names look like, for tests of the cleaning.
pub fn dead_owner_tag() -> String {
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(4_194_304);
    format!("{}.{}", host().unwrap_or("unknown-host"), pid_max + 1)
}

/// Whether process `pid` exists on this host (true when that cannot be known).
fn process_exists(pid: u32) -> bool {
    if !Path::new("/proc/self").exists() {
        return true;
    }
    pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists()
}

/// Whether `name` is `<prefix><host>.<pid>.…` of this host and of a process that is gone.
pub fn is_stale(name: &str, prefix: &str) -> bool {
    let Some(host) = host() else {
        return false;
    };
    let Some(rest) = name.strip_prefix(prefix) else {
        return false;
    };
    let mut parts = rest.splitn(3, '.');
    let (Some(owner_host), Some(pid), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    owner_host == host && !process_exists(pid)
}

/// Removes the stale entries of `dir` named `<prefix>…` (files, or folders with what they
/// hold); returns how many were removed. Failures are skipped: cleaning is best effort and never
/// stops the work that asked for it.
pub fn remove_stale(dir: &Path, prefix: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(|n| is_stale(n, prefix)) {
            continue;
        }
        let path = entry.path();
        let gone = match entry.file_type() {
            Ok(kind) if kind.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
        if gone.is_ok() {
            removed += 1;
        }
    }
    removed
}

/// A temporary `.vis.db` file in `dir`, named with this process's tag, after removing the
/// stale ones that killed writers left there.
pub(crate) fn vis_db_temp_in(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    remove_stale(dir, TEMP_PREFIX);
    tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{}.", owner_tag()))
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)
}

/// A temporary file for a writer's index runs in `dir`, named with this process's tag (the
/// stale ones were removed when the `.vis.db` temporary file beside it was made).
pub(crate) fn index_temp_in(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{}.", owner_tag()))
        .suffix(INDEX_TEMP_SUFFIX)
        .tempfile_in(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: temporary files of killed writers stayed forever.
    /// Only this host's entries of dead processes go; live ones, other hosts' ones and names
    /// without a tag stay.
    #[test]
    fn only_this_hosts_dead_owners_leftovers_are_removed() {
        if host().is_none() {
            return; // no host name: nothing is ever cleaned (checked by `is_stale`)
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let dead = dead_owner_tag();
        let live = owner_tag();
        let names = [
            (format!(".graph-ascend-{dead}.abc123.vis.db.tmp"), false),
            (format!(".graph-ascend-{live}.def456.vis.db.tmp"), true),
            (format!(".graph-ascend-{dead}.ghi789.index.tmp"), false),
            (format!(".graph-ascend-{live}.jkl012.index.tmp"), true),
            (format!(".graph-ascend-other{dead}.abc123.vis.db.tmp"), true),
            (".graph-ascend-Xy12Zq.vis.db.tmp".to_owned(), true),
            (format!("graph-{dead}.x.vis.db"), true),
        ];
        for (name, _) in &names {
            std::fs::write(dir.path().join(name), b"x").expect("write");
        }
        let staging = dir.path().join(format!(".graph-ascend-staging-{dead}.c1"));
        std::fs::create_dir_all(staging.join("inner")).expect("mkdir");
        std::fs::write(staging.join("inner/file"), b"x").expect("write");

        let temp = vis_db_temp_in(dir.path()).expect("temp");
        let own = temp
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name");
        assert!(
            own.starts_with(&format!(".graph-ascend-{}.", owner_tag())),
            "{own}"
        );
        assert!(
            !is_stale(own, TEMP_PREFIX),
            "a live writer's file is not stale"
        );
        for (name, kept) in &names {
            assert_eq!(dir.path().join(name).exists(), *kept, "{name}");
        }
        assert!(staging.exists(), "another prefix is left alone");
        assert_eq!(remove_stale(dir.path(), ".graph-ascend-staging-"), 1);
        assert!(!staging.exists());
    }
}
