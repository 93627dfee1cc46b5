//! The JSON values the generated writers are made of, appended to a `Vec<u8>`.
//!
//! # Why not serde
//!
//! The generated code (`build.rs`) knows every answer's keys and value types when it is
//! compiled, so it writes each key as one pre-escaped byte string and each value through the
//! function of its type below. Going through serde instead (a `Serializer` state machine per
//! object, every key escaped anew at run time) took about three times as long for a module
//! expansion's 322 KB answer: the same typed message written both ways, in process, before the
//! serde path was removed. Writing that answer was the largest part of the sidecar's time per
//! click.
//!
//! # Byte for byte serde_json's compact format
//!
//! What the page (and the recorded msprobe answers the tests compare with) reads is serde_json's
//! output, and that is what these functions write: integers through `itoa`, finite floats
//! through `zmij` (the formatter serde_json uses), strings escaped as serde_json escapes them:
//! `\"` `\\` `\b` `\f` `\n` `\r` `\t`, the other control characters as `\u00XX` in lowercase hex,
//! everything else (DEL and non-ASCII included) as it is. `tests/json_bytes.rs` compares them
//! with serde_json on random values and every typed answer of the tests, and the fuzz target
//! `json_strings` on any string libFuzzer finds.

/// How `byte` is escaped inside a JSON string: 0 not at all, `u` as `\u00XX`, else the letter
/// after the backslash (serde_json's table).
const ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

const ONES: u64 = 0x0101_0101_0101_0101;
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `word` that needs escaping, and no other bit.
///
/// Exact, with no carry from one byte into the next: `(b & 0x7f) + 0x60` has its high bit set
/// when the low seven bits are at least 0x20, and or-ing `b` sets it for bytes from 0x80 on, so
/// its complement flags exactly the bytes below 0x20; likewise `(y & 0x7f) + 0x7f | y` has the
/// high bit set unless `y` is 0, which finds the bytes equal to `"` or `\` as the zero bytes of
/// `word ^ their byte`.
#[inline]
fn needs_escape(word: u64) -> u64 {
    let control = !(((word & LOW7) + 0x60 * ONES) | word);
    let quote = word ^ (b'"' as u64 * ONES);
    let quote = !(((quote & LOW7) + LOW7) | quote);
    let backslash = word ^ (b'\\' as u64 * ONES);
    let backslash = !(((backslash & LOW7) + LOW7) | backslash);
    (control | quote | backslash) & HIGHS
}

/// Appends `s` as a JSON string, quotes included.
///
/// Eight bytes are checked at a time (one `u64`), the last few one by one; each clean run is
/// copied at once.
pub fn string(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // `bytes[start..i]` is checked and clean, not yet copied.
    let mut start = 0;
    let mut i = 0;
    while let Some(chunk) = bytes.get(i..).and_then(|rest| rest.first_chunk::<8>()) {
        let hits = needs_escape(u64::from_le_bytes(*chunk));
        if hits == 0 {
            i += 8;
            continue;
        }
        let at = i + (hits.trailing_zeros() / 8) as usize;
        out.extend_from_slice(&bytes[start..at]);
        escape(out, bytes[at]);
        i = at + 1;
        start = i;
    }
    while let Some(&b) = bytes.get(i) {
        if ESCAPE[b as usize] != 0 {
            out.extend_from_slice(&bytes[start..i]);
            escape(out, b);
            start = i + 1;
        }
        i += 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Appends the escape of `byte`, one that needs escaping.
#[cold]
fn escape(out: &mut Vec<u8>, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match ESCAPE[byte as usize] {
        b'u' => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[(byte >> 4) as usize],
            HEX[(byte & 0xf) as usize],
        ]),
        letter => out.extend_from_slice(&[b'\\', letter]),
    }
}

/// Appends the separator before a field and the field's key: `key` is the key already written
/// as JSON with its colon (`b"\"name\":"`); `first` says whether the object has no field yet.
#[inline]
pub fn key(out: &mut Vec<u8>, first: &mut bool, key: &[u8]) {
    if !*first {
        out.push(b',');
    }
    *first = false;
    out.extend_from_slice(key);
}

#[inline]
pub fn int(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

#[inline]
pub fn boolean(out: &mut Vec<u8>, v: bool) {
    out.extend_from_slice(if v { b"true" } else { b"false" });
}

#[inline]
pub fn null(out: &mut Vec<u8>) {
    out.extend_from_slice(b"null");
}

/// A number as serde_json writes an `f64`: finite as `zmij` prints it, else `null`.
pub fn number(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        out.extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes());
    } else {
        null(out);
    }
}

/// A proto `double` of an answer: a number when finite, else the string `"NaN"`,
/// `"Infinity"` or `"-Infinity"` (protobuf's JSON mapping, which the page reads).
pub fn double(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        number(out, v);
    } else if v.is_nan() {
        out.extend_from_slice(b"\"NaN\"");
    } else if v > 0.0 {
        out.extend_from_slice(b"\"Infinity\"");
    } else {
        out.extend_from_slice(b"\"-Infinity\"");
    }
}

/// A JSON array of `items`, each written by `one`.
pub fn array<T>(out: &mut Vec<u8>, items: &[T], mut one: impl FnMut(&mut Vec<u8>, &T)) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        one(out, item);
    }
    out.push(b']');
}

/// An array of strings.
pub fn strings(out: &mut Vec<u8>, items: &[String]) {
    array(out, items, |out, s| string(out, s));
}

/// `google.protobuf.Struct`: the JSON object it holds.
pub fn struct_value(out: &mut Vec<u8>, s: &prost_types::Struct) {
    out.push(b'{');
    for (i, (k, v)) in s.fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, k);
        out.push(b':');
        value(out, v);
    }
    out.push(b'}');
}

/// `google.protobuf.ListValue`: the JSON array it holds.
pub fn list_value(out: &mut Vec<u8>, l: &prost_types::ListValue) {
    array(out, &l.values, value);
}

/// `google.protobuf.Value`: the JSON value it holds (unset: `null`; a non-finite number:
/// `null`, as serde_json writes it).
///
/// Recursive, as serde_json's writer is: the values come from the service's own messages, whose
/// nested JSON was parsed by serde_json (which refuses more than 128 levels).
pub fn value(out: &mut Vec<u8>, v: &prost_types::Value) {
    use prost_types::value::Kind;
    match &v.kind {
        None | Some(Kind::NullValue(_)) => null(out),
        Some(Kind::NumberValue(n)) => number(out, *n),
        Some(Kind::StringValue(s)) => string(out, s),
        Some(Kind::BoolValue(b)) => boolean(out, *b),
        Some(Kind::StructValue(s)) => struct_value(out, s),
        Some(Kind::ListValue(l)) => list_value(out, l),
    }
}
