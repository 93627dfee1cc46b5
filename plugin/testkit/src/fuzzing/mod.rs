//! One entry point per fuzz target of `fuzz/`, taking raw bytes: what the cargo-fuzz targets
//! run (each a one-line wrapper), and what `tests/fuzz_corpus.rs` replays their corpora and
//! crash cases through on stable Rust ([`replay`]). An error answer is fine; a panic, an abort
//! or a hang is a bug.

use std::path::Path;

mod diagnose;
mod dump;
mod service;

pub use diagnose::entry_scanner;
pub use dump::{construct_json, dump_json, fastjson_vs_serde, npy, pt, stack_json};
pub use service::{json_strings, request, vis_db};

/// A reader's entry point: a file's bytes in, nothing out (any answer is fine, a panic is not).
pub type Reader = fn(&[u8]);

/// The entry point of each fuzz target, by the target's name (its corpus folder's name).
pub const TARGETS: [(&str, Reader); 10] = [
    ("dump_json", dump_json),
    ("fastjson_vs_serde", fastjson_vs_serde),
    ("construct_json", construct_json),
    ("stack_json", stack_json),
    ("npy", npy),
    ("pt", pt),
    ("vis_db", vis_db),
    ("request", request),
    ("json_strings", json_strings),
    ("entry_scanner", entry_scanner),
];

/// Why a corpus replay failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{target} panicked on {path}")]
    Panicked {
        target: String,
        path: std::path::PathBuf,
    },
}

/// Replays the corpus and crash cases of one target (`<fuzz>/corpus/<target>/`,
/// `<fuzz>/artifacts/<target>/`) through `read`: `Err` names the first input that panicked;
/// `Ok` is how many inputs were replayed (`tests/fuzz_corpus.rs`).
pub fn replay(fuzz: &Path, target: &str, read: Reader) -> Result<usize, ReplayError> {
    let mut replayed = 0;
    for kind in ["corpus", "artifacts"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(kind).join(target)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_file() {
                continue;
            }
            let bytes = std::fs::read(&path).map_err(|source| ReplayError::Read {
                path: path.clone(),
                source,
            })?;
            if std::panic::catch_unwind(|| read(&bytes)).is_err() {
                return Err(ReplayError::Panicked {
                    target: target.to_string(),
                    path,
                });
            }
            replayed += 1;
        }
    }
    Ok(replayed)
}
