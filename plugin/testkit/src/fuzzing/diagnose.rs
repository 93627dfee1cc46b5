//! The diagnosis's readers of what files hold.

use graph_ascend_diagnose::entry::read_both_ways;

/// Differential: the diagnosis's hand-written scanner of an `input_data` / `output_data` text
/// (msprobe's usual shape) against serde's reader of the same text. Where the scanner answers,
/// serde must accept the text and give the same entries (printed, so that NaN statistics compare
/// equal); the scanner may decline anything. The first byte says whether the text is an
/// `output_data` (odd) and how long the node's name is (its upper bits), the name being the
/// start of the text's first key when it has one.
pub fn entry_scanner(bytes: &[u8]) {
    let Some((&head, rest)) = bytes.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let output = head & 1 == 1;
    let name_len = usize::from(head >> 1);
    let node = text
        .split('"')
        .nth(1)
        .and_then(|key| key.get(..name_len.min(key.len())))
        .unwrap_or("");
    let (scanned, deserialized) = read_both_ways(node, text, output);
    if let Some(scanned) = scanned {
        let scanned = format!("{scanned:?}");
        match deserialized {
            Some(d) => assert_eq!(scanned, format!("{d:?}"), "{text:?}"),
            None => panic!("the scanner reads {text:?}, serde refuses it"),
        }
    }
}
