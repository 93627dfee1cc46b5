//! Checks that the browser's JSON ([`crate::json`]) is serde_json's JSON, byte for byte: for the
//! tests (`tests/json_bytes.rs`, the service's tests, which check every typed answer they
//! render) and the fuzz target `json_strings` (`graph_ascend_testkit::fuzzing::json_strings`).
//! Not used by the sidecar itself.
//!
//! The writer of [`crate::json::write`] must write what serde_json 1.0 writes in compact form
//! with the workspace's features (`preserve_order`, `float_roundtrip`), because that is what the
//! page and the recorded answers were compared with. No serde path is left to compare with for a
//! whole answer, so [`canonical`] asks serde_json itself: parsed and written again, the bytes must
//! not change. With `preserve_order` (keys kept in their order) and `float_roundtrip` (every
//! number read back as the same `f64`) that holds exactly when the bytes are what serde_json
//! writes for the same value: any other escape, number format, spacing or key order changes.

/// Why two JSON texts differ: the first differing byte's offset and a few bytes around it of
/// each, for the test's or fuzzer's failure message.
#[derive(Debug, PartialEq, Eq)]
pub struct Difference(pub String);

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Difference {}

/// `ours` (what the browser gets for `what`) against serde_json's bytes for the same value.
pub fn compare(what: &str, ours: &[u8], serde_json: &[u8]) -> Result<(), Difference> {
    if ours == serde_json {
        return Ok(());
    }
    let at = ours
        .iter()
        .zip(serde_json)
        .position(|(a, b)| a != b)
        .unwrap_or(ours.len().min(serde_json.len()));
    let around = |bytes: &[u8]| {
        let from = at.saturating_sub(40);
        let to = (at + 40).min(bytes.len());
        String::from_utf8_lossy(&bytes[from..to]).into_owned()
    };
    Err(Difference(format!(
        "{what}: our JSON ({} bytes) differs from serde_json's ({} bytes) at byte {at}:\n  \
         ours:       {:?}\n  serde_json: {:?}",
        ours.len(),
        serde_json.len(),
        around(ours),
        around(serde_json),
    )))
}

/// `bytes` are serde_json's compact JSON of the value they hold (see the module doc): valid JSON
/// that serde_json writes back unchanged.
///
/// Duplicate keys in one object fail too (serde_json keeps one): a browser would see one of them.
pub fn canonical(bytes: &[u8]) -> Result<(), Difference> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        Difference(format!(
            "not valid JSON ({e}): {:?}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
        ))
    })?;
    let again = serde_json::to_vec(&value)
        .map_err(|e| Difference(format!("serde_json cannot write its own value: {e}")))?;
    compare("answer", bytes, &again)
}
