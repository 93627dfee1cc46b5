//! The dump readers' fuzz entry points, each taking a file's raw bytes and reading it the way
//! the converter does.

use std::path::Path;

use graph_ascend_dump::tensor::Tensor;
use graph_ascend_dump::{
    fastjson, json, parse_op, parse_op_fast, parse_op_packed, Construct, DumpFile, StackMap,
};

/// `dump.json`: the fast reader (each entry parsed as the graph builder does), then the
/// `serde_json` reader it falls back to.
pub fn dump_json(bytes: &[u8]) {
    let _ = fastjson::read_dump(bytes, &mut |name, entry| {
        let _ = parse_op_fast(name, entry);
        let _ = parse_op_packed(name, entry);
    });
    if let Ok(value) = json::parse_python_json(bytes) {
        if let Ok(dump) = DumpFile::from_value(Path::new("dump.json"), value) {
            for (name, entry) in &dump.data {
                let _ = parse_op(name, entry);
            }
        }
    }
}

/// `construct.json`.
pub fn construct_json(bytes: &[u8]) {
    if let Ok(value) = json::parse_python_json(bytes) {
        let _ = Construct::from_value(Path::new("construct.json"), value);
    }
}

/// `stack.json`.
pub fn stack_json(bytes: &[u8]) {
    if let Ok(value) = json::parse_python_json(bytes) {
        let _ = StackMap::from_value(Path::new("stack.json"), value);
    }
}

/// A MindSpore `.npy` tensor.
pub fn npy(bytes: &[u8]) {
    let _ = Tensor::parse(Path::new("tensor.npy"), bytes);
}

/// A PyTorch `.pt` tensor.
pub fn pt(bytes: &[u8]) {
    let _ = Tensor::parse(Path::new("tensor.pt"), bytes);
}

/// Differential: the fast JSON reader ([`fastjson`]) against `serde_json` (through the
/// same rewrite of Python's non-finite tokens the full reader uses) on one value. Both must
/// give the same value, or both refuse it. Known, deliberate differences are not compared: text
/// holding the marker byte `\u{1}` (which the `serde_json` path reserves for non-finite
/// numbers), and nesting near the depth limit (the two count depth differently by one).
pub fn fastjson_vs_serde(bytes: &[u8]) {
    if bytes.contains(&0x01) || bytes.windows(6).any(|w| w.eq_ignore_ascii_case(b"\\u0001")) {
        return;
    }
    let depth = bytes.iter().filter(|&&b| b == b'[' || b == b'{').count();
    let fast = fastjson::Parser::new(bytes).and_then(|mut p| {
        let v = p.value().ok()?;
        p.at_end().then(|| v.to_value())
    });
    let full = json::parse_python_json(bytes).ok();
    if depth >= fastjson::MAX_DEPTH - 1 && (fast.is_none() || full.is_none()) {
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
