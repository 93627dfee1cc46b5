//! Special files in a test's folder: what an attacker or a careless colleague swaps in where a
//! regular file is expected.

use std::path::Path;

/// Makes a FIFO at `path` (with `mkfifo`); no writer ever opens it, so reading it by name would
/// wait forever.
pub fn make_fifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", path.display());
}
