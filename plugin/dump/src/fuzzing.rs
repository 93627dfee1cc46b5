//! One entry point per dump reader, taking a file's raw bytes: what the fuzz targets in `fuzz/`
//! run, and what `tests/fuzz_corpus.rs` replays their corpora and crash cases through on stable
//! Rust. Each reads its input the way the converter does; an error is a fine answer, a panic,
//! an abort or a hang is a bug.

use std::path::Path;

use crate::{Construct, DumpFile, StackMap};

/// `dump.json`: the fast reader (each entry parsed as the graph builder does), then the
/// `serde_json` reader it falls back to.
pub fn dump_json(bytes: &[u8]) {
    let _ = crate::fastjson::read_dump(bytes, &mut |name, entry| {
        let _ = crate::parse_op_fast(name, entry);
        let _ = crate::parse_op_packed(name, entry);
    });
    if let Ok(value) = crate::json::parse_python_json(bytes) {
        if let Ok(dump) = DumpFile::from_value(Path::new("dump.json"), value) {
            for (name, entry) in &dump.data {
                let _ = crate::parse_op(name, entry);
            }
        }
    }
}

/// `construct.json`.
pub fn construct_json(bytes: &[u8]) {
    if let Ok(value) = crate::json::parse_python_json(bytes) {
        let _ = Construct::from_value(Path::new("construct.json"), value);
    }
}

/// `stack.json`.
pub fn stack_json(bytes: &[u8]) {
    if let Ok(value) = crate::json::parse_python_json(bytes) {
        let _ = StackMap::from_value(Path::new("stack.json"), value);
    }
}

/// A MindSpore `.npy` tensor.
pub fn npy(bytes: &[u8]) {
    let _ = crate::tensor::Tensor::parse(Path::new("tensor.npy"), bytes);
}

/// A PyTorch `.pt` tensor.
pub fn pt(bytes: &[u8]) {
    let _ = crate::tensor::Tensor::parse(Path::new("tensor.pt"), bytes);
}

/// Differential: the fast JSON reader ([`crate::fastjson`]) against `serde_json` (through the
/// same rewrite of Python's non-finite tokens the full reader uses) on one value. Both must
/// give the same value, or both refuse it. Known, deliberate differences are not compared: text
/// holding the marker byte `\u{1}` (which the `serde_json` path reserves for non-finite
/// numbers), and nesting near the depth limit (the two count depth differently by one).
pub fn fastjson_vs_serde(bytes: &[u8]) {
    if bytes.contains(&0x01) || bytes.windows(6).any(|w| w.eq_ignore_ascii_case(b"\\u0001")) {
        return;
    }
    let depth = bytes.iter().filter(|&&b| b == b'[' || b == b'{').count();
    let fast = crate::fastjson::Parser::new(bytes).and_then(|mut p| {
        let v = p.value().ok()?;
        p.at_end().then(|| v.to_value())
    });
    let full = crate::json::parse_python_json(bytes).ok();
    if depth >= crate::fastjson::MAX_DEPTH - 1 && (fast.is_none() || full.is_none()) {
        return;
    }
    match (&fast, &full) {
        (Some(a), Some(b)) => assert!(a == b, "fast {a:?} != serde_json {b:?}"),
        (None, None) => {}
        _ => panic!(
            "fast reader {} but serde_json {}",
            if fast.is_some() { "accepts" } else { "refuses" },
            if full.is_some() { "accepts" } else { "refuses" },
        ),
    }
}

/// A reader's entry point: a file's bytes in, nothing out (any answer is fine, a panic is not).
pub type Reader = fn(&[u8]);

/// The entry point of each fuzz target, by the target's name (its corpus folder's name).
pub const TARGETS: [(&str, Reader); 6] = [
    ("dump_json", dump_json),
    ("fastjson_vs_serde", fastjson_vs_serde),
    ("construct_json", construct_json),
    ("stack_json", stack_json),
    ("npy", npy),
    ("pt", pt),
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
/// `Ok` is how many inputs were replayed. The replay tests of each crate with fuzz entry points
/// use it.
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
