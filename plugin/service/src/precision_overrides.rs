//! The precision indexes recomputed from chosen error metrics (`updatePrecisionError`), kept
//! per file in memory: the route writes them, the precision filter reads through them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Precision indexes recomputed by `updatePrecisionError`, per file, step and rank.
///
/// msprobe keeps these in memory only (the file keeps the converter's values) and drops them
/// when the root is expanded again; so does this cache. The precision filter reads through it.
#[derive(Default)]
pub struct PrecisionOverrides {
    map: Mutex<OverrideMap>,
}

/// `(file, step, rank)` → node name → recomputed precision index.
type OverrideMap = HashMap<(PathBuf, i64, i64), HashMap<String, f64>>;

impl PrecisionOverrides {
    fn lock(&self) -> std::sync::MutexGuard<'_, OverrideMap> {
        crate::sync::lock(&self.map)
    }

    /// The recomputed index of `name`, if any.
    pub fn get(&self, file: &Path, step: i64, rank: i64) -> Option<HashMap<String, f64>> {
        self.lock().get(&(file.to_owned(), step, rank)).cloned()
    }

    pub(crate) fn set(&self, file: &Path, step: i64, rank: i64, values: HashMap<String, f64>) {
        self.lock().insert((file.to_owned(), step, rank), values);
    }

    /// Forgets a file's recomputed indexes (a root expansion, or an edit of the file).
    pub fn clear(&self, file: &Path) {
        self.lock().retain(|(f, _, _), _| f != file);
    }
}
