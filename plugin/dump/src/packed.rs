//! Items packed into one small byte buffer, for graphs that hold every item of a dump.
//!
//! An [`Item`] is a vector of `(name, PyVal)` pairs: about ten heap blocks and 600 bytes for a
//! tensor. A [`PackedItem`] is the same fields in one boxed byte slice (about 100 bytes): known
//! field names and common strings are one-byte codes, numbers are stored unboxed. The fields
//! keep their order and their Python types, so [`PackedItem::unpack`] gives back exactly the
//! item that was packed, and [`PackedItem::fields`] reads them in place (no allocation) for the
//! row formatter.

use std::borrow::Cow;

use crate::fastjson::JVal;
use crate::items::{flatten, known_field, FieldName, Item, LeafVal, Lookup, OpData, KNOWN_FIELDS};
use crate::pyval::PyVal;

/// Strings that fill most values (types, dtypes, flags), stored as a one-byte code.
const KNOWN_STRS: [&str; 28] = [
    "torch.Tensor",
    "torch.float32",
    "torch.float16",
    "torch.bfloat16",
    "torch.int64",
    "torch.int32",
    "torch.bool",
    "True",
    "False",
    "-1",
    "[]",
    "<class 'int'>",
    "<class 'float'>",
    "<class 'bool'>",
    "<class 'NoneType'>",
    "<class 'str'>",
    "int",
    "float",
    "bool",
    "00000000",
    "pass",
    "warning",
    "error",
    "N/A",
    " ",
    "Nan",
    "torch.Size",
    "slice",
];

/// Position of `s` in [`KNOWN_STRS`].
fn known_str(s: &str) -> Option<usize> {
    static LOOKUP: std::sync::OnceLock<Lookup> = std::sync::OnceLock::new();
    LOOKUP
        .get_or_init(|| Lookup::new(&KNOWN_STRS))
        .find(&KNOWN_STRS, s)
}

const T_NONE: u8 = 0;
const T_FALSE: u8 = 1;
const T_TRUE: u8 = 2;
const T_INT: u8 = 3;
const T_BIGINT: u8 = 4;
const T_FLOAT: u8 = 5;
const T_STR: u8 = 6;
const T_LIST: u8 = 7;
const T_DICT: u8 = 8;
const T_KNOWN_STR: u8 = 9;
/// A string equal to one written earlier in the same item: its start and length follow (the
/// bytes of the earlier `T_STR`'s text). msprobe repeats a scalar's value in `Max`, `Min`,
/// `Mean`, `Norm` and `value`: one long string in a dump must not be kept five times.
const T_STR_AGAIN: u8 = 10;
/// Strings at least this long are written once per item ([`T_STR_AGAIN`] after that).
const SHARED_STR_MIN: usize = 64;
/// A float that is exactly a 32-bit float (most dump statistics): its 4 bytes follow.
const T_F32: u8 = 11;
/// A list or dict equal to one written earlier in the same item: the start and length of the
/// earlier one's packed bytes follow. msprobe repeats a non-tensor's value (a list, say) in
/// `Max`, `Min`, `Mean`, `Norm`: a long list is kept once, as a long string is.
const T_AGAIN: u8 = 12;
/// Key byte of a field name not in the known table (its text follows).
const K_CUSTOM: u8 = 0xFF;

/// The bytes of an item being packed, and where its long strings are (for [`T_STR_AGAIN`]).
#[derive(Default)]
struct Out {
    bytes: Vec<u8>,
    /// `(start, len)` of each long string's text in `bytes`.
    long_strs: Vec<(usize, usize)>,
    /// `(start, len)` of each long top-level list or dict's packed bytes.
    long_vals: Vec<(usize, usize)>,
    /// Lists and dicts open: their values are read through a reader over their own bytes,
    /// where an item offset means nothing, so strings inside them are written in full.
    nested: usize,
}

impl Out {
    fn with_capacity(n: usize) -> Out {
        Out {
            bytes: Vec::with_capacity(n),
            long_strs: Vec::new(),
            long_vals: Vec::new(),
            nested: 0,
        }
    }

    fn finish(self) -> PackedItem {
        PackedItem(self.bytes.into_boxed_slice())
    }
}

impl std::ops::Deref for Out {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.bytes
    }
}

impl std::ops::DerefMut for Out {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }
}

/// One item's fields in a single allocation.
#[derive(Clone, Default, PartialEq)]
pub struct PackedItem(Box<[u8]>);

impl std::fmt::Debug for PackedItem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.fields()).finish()
    }
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    put_varint(out, n as u64);
}

/// 7 bits a byte, low first, the high bit set on all but the last.
fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let b = (n & 0x7F) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// An integer: zigzag, then 7 bits a byte (a small int is 2 bytes with its tag, as short as
/// its text in the dump: a `shape` of 64M ones is not kept at 9 bytes a number).
fn put_int(out: &mut Vec<u8>, i: i64) {
    out.push(T_INT);
    put_varint(out, ((i << 1) ^ (i >> 63)) as u64);
}

/// A float: 4 bytes when it is exactly a 32-bit float, else 8.
fn put_float(out: &mut Vec<u8>, f: f64) {
    let narrow = f as f32;
    if f64::from(narrow).to_bits() == f.to_bits() {
        out.push(T_F32);
        out.extend_from_slice(&narrow.to_le_bytes());
    } else {
        out.push(T_FLOAT);
        out.extend_from_slice(&f.to_le_bytes());
    }
}

/// Writes a top-level list or dict with `write`, then, when it is long and equal to one
/// written before in this item, replaces it by a [`T_AGAIN`] reference to that one.
fn put_shared(out: &mut Out, write: impl FnOnce(&mut Out)) {
    let start = out.bytes.len();
    let shared = out.nested == 0;
    write(out);
    if !shared {
        return;
    }
    let len = out.bytes.len() - start;
    if len < SHARED_STR_MIN {
        return;
    }
    let (done, new) = out.bytes.split_at(start);
    let earlier = out
        .long_vals
        .iter()
        .copied()
        .find(|&(s, l)| l == len && done[s..s + l] == *new);
    match earlier {
        Some((s, l)) => {
            out.bytes.truncate(start);
            out.bytes.push(T_AGAIN);
            put_len(&mut out.bytes, s);
            put_len(&mut out.bytes, l);
        }
        None => out.long_vals.push((start, len)),
    }
}

fn put_text(out: &mut Vec<u8>, s: &str) {
    put_len(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Out, v: &PyVal) {
    match v {
        PyVal::None => out.push(T_NONE),
        PyVal::Bool(false) => out.push(T_FALSE),
        PyVal::Bool(true) => out.push(T_TRUE),
        PyVal::Int(i) => put_int(out, *i),
        PyVal::BigInt(s) => {
            out.push(T_BIGINT);
            put_text(out, s);
        }
        PyVal::Float(f) => put_float(out, *f),
        PyVal::Str(s) => put_str(out, s),
        PyVal::List(items) => put_shared(out, |out| {
            out.push(T_LIST);
            put_len(out, items.len());
            out.nested += 1;
            for x in items {
                put_value(out, x);
            }
            out.nested -= 1;
        }),
        PyVal::Dict(items) => put_shared(out, |out| {
            out.push(T_DICT);
            put_len(out, items.len());
            out.nested += 1;
            for (k, x) in items {
                put_text(out, k);
                put_value(out, x);
            }
            out.nested -= 1;
        }),
    }
}

/// The packed form of `PyVal::from_jval(v)`, written without building the `PyVal`.
fn put_jval(out: &mut Out, v: &JVal) {
    match v {
        JVal::Null => out.push(T_NONE),
        JVal::Bool(false) => out.push(T_FALSE),
        JVal::Bool(true) => out.push(T_TRUE),
        JVal::Int(i) => put_int(out, *i),
        JVal::BigUint(u) => {
            out.push(T_BIGINT);
            put_text(out, &u.to_string());
        }
        JVal::Float(f) | JVal::NonFinite(f) => put_float(out, *f),
        JVal::Str(s) => put_str(out, s),
        JVal::Arr(_) | JVal::LazyArr(_) => put_shared(out, |out| {
            out.push(T_LIST);
            put_len(out, v.array_len());
            out.nested += 1;
            for x in v.elements() {
                put_jval(out, &x);
            }
            out.nested -= 1;
        }),
        JVal::Obj(items) => put_shared(out, |out| {
            out.push(T_DICT);
            put_len(out, items.len());
            out.nested += 1;
            for (k, x) in items {
                put_text(out, k);
                put_jval(out, x);
            }
            out.nested -= 1;
        }),
    }
}

/// A string value: a one-byte code when it is a known string, a reference when it is a long
/// string already written in this item.
fn put_str(out: &mut Out, s: &str) {
    if let Some(i) = known_str(s) {
        out.extend_from_slice(&[T_KNOWN_STR, i as u8]);
        return;
    }
    if s.len() < SHARED_STR_MIN || out.nested > 0 {
        out.push(T_STR);
        put_text(out, s);
        return;
    }
    let earlier = out
        .long_strs
        .iter()
        .copied()
        .find(|&(start, len)| len == s.len() && out.bytes[start..start + len] == *s.as_bytes());
    match earlier {
        Some((start, len)) => {
            out.push(T_STR_AGAIN);
            put_len(out, start);
            put_len(out, len);
        }
        None => {
            out.push(T_STR);
            put_len(out, s.len());
            let start = out.len();
            out.extend_from_slice(s.as_bytes());
            out.long_strs.push((start, s.len()));
        }
    }
}

fn put_key(out: &mut Vec<u8>, name: &str, index: Option<u8>) {
    match index {
        Some(i) => out.push(i),
        None => {
            out.push(K_CUSTOM);
            put_text(out, name);
        }
    }
}

/// Field indexes [`pack_leaf`] looks for.
const F_DTYPE: u8 = 1;
const F_REQUIRES_GRAD: u8 = 7;
const F_DATA_NAME: u8 = 8;
const F_MD5: u8 = 9;
const F_VALUE: u8 = 10;
const F_STATS: [u8; 4] = [3, 4, 5, 6];

/// `PackedItem::pack(&leaf_item(name, leaf))`, straight from the parsed JSON for the usual
/// leaf (one with a `dtype`, and an `md5` unless it has no `value`): no `Item`, no `PyVal`.
/// Other leaves (scalars, sizes, slices, process groups…) take the general path.
pub(crate) fn pack_leaf(name: &str, leaf: &[(Cow<str>, JVal)]) -> PackedItem {
    let mut keys = [None; 16];
    let mut present = 0u64;
    if leaf.len() > keys.len() {
        return pack_fields(&crate::items::leaf_fields(name, leaf));
    }
    for ((k, _), slot) in leaf.iter().zip(keys.iter_mut()) {
        *slot = field_code(k);
        if let Some(i) = *slot {
            present |= 1 << i;
        }
    }
    let has = |i: u8| present & (1 << i) != 0;
    // msprobe replaces a falsy dtype or md5 (`null`, `""`): the general path does that.
    let falsy = |i: u8| {
        leaf.iter().zip(keys.iter()).any(|((_, v), &k)| {
            k == Some(i) && matches!(v, JVal::Null | JVal::Bool(false) | JVal::Int(0))
                || k == Some(i) && matches!(v, JVal::Str(s) if s.is_empty())
        })
    };
    if !has(F_DTYPE) || (!has(F_MD5) && has(F_VALUE)) || falsy(F_DTYPE) || falsy(F_MD5) {
        return pack_fields(&crate::items::leaf_fields(name, leaf));
    }
    let mut out = Out::with_capacity(16 * (leaf.len() + 3));
    for ((k, v), &index) in leaf.iter().zip(keys.iter()) {
        put_key(&mut out, k, index);
        match (index, v) {
            // msprobe keeps a non-empty data_name, else "-1".
            (Some(F_DATA_NAME), JVal::Str(s)) if !s.is_empty() => put_str(&mut out, s),
            (Some(F_DATA_NAME), _) => put_str(&mut out, "-1"),
            (Some(F_REQUIRES_GRAD), JVal::Bool(b)) => {
                put_str(&mut out, if *b { "True" } else { "False" })
            }
            _ => put_jval(&mut out, v),
        }
    }
    if !has(F_DATA_NAME) {
        out.extend_from_slice(&[F_DATA_NAME]);
        put_str(&mut out, "-1");
    }
    for i in std::iter::once(F_REQUIRES_GRAD).chain(F_STATS) {
        if !has(i) {
            out.extend_from_slice(&[i, T_NONE]);
        }
    }
    if !has(F_MD5) {
        // The CRC of an absent value is the CRC of the empty string.
        out.push(F_MD5);
        put_str(&mut out, "00000000");
    }
    out.finish()
}

/// `PackedItem::pack(&leaf_item(..))` from the fields msprobe's rules made, values of the dump
/// packed straight from the JSON (no `PyVal` of a long value, no copies of it).
fn pack_fields(fields: &[(FieldName, LeafVal)]) -> PackedItem {
    let mut out = Out::with_capacity(16 * (fields.len() + 1));
    // Dump values already written as long lists or dicts, by address: msprobe's copies of one
    // value refer to it without being written and compared again (the same bytes
    // `put_shared` would leave: a value recorded there has no earlier equal).
    let mut written: Vec<(*const JVal, (usize, usize))> = Vec::new();
    for (k, v) in fields {
        put_key(&mut out, k, field_code(k));
        match v {
            LeafVal::Dump(j) => {
                let at = std::ptr::from_ref(*j);
                if let Some(&(_, (start, len))) = written.iter().find(|(p, _)| *p == at) {
                    out.push(T_AGAIN);
                    put_len(&mut out, start);
                    put_len(&mut out, len);
                    continue;
                }
                let start = out.len();
                put_jval(&mut out, j);
                let span = (start, out.len() - start);
                if out.long_vals.last() == Some(&span) {
                    written.push((at, span));
                }
            }
            LeafVal::Made(p) => put_value(&mut out, p),
        }
    }
    out.finish()
}

/// A value read in place from a [`PackedItem`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValRef<'a> {
    None,
    Bool(bool),
    Int(i64),
    BigInt(&'a str),
    Float(f64),
    Str(&'a str),
    /// A list or dict, still packed (see [`ValRef::to_pyval`]).
    Nested(&'a [u8]),
}

impl<'a> ValRef<'a> {
    /// The owned value.
    pub fn to_pyval(self) -> PyVal {
        match self {
            ValRef::None => PyVal::None,
            ValRef::Bool(b) => PyVal::Bool(b),
            ValRef::Int(i) => PyVal::Int(i),
            ValRef::BigInt(s) => PyVal::BigInt(s.to_string()),
            ValRef::Float(f) => PyVal::Float(f),
            ValRef::Str(s) => PyVal::Str(s.to_string()),
            ValRef::Nested(bytes) => {
                let mut r = Reader { b: bytes, pos: 0 };
                r.value_owned()
            }
        }
    }

    pub fn as_str(self) -> Option<&'a str> {
        match self {
            ValRef::Str(s) => Some(s),
            _ => None,
        }
    }
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> u8 {
        let v = self.b.get(self.pos).copied().unwrap_or(T_NONE);
        self.pos += 1;
        v
    }

    fn len(&mut self) -> usize {
        usize::try_from(self.varint()).unwrap_or(usize::MAX)
    }

    /// A [`put_varint`] number (at most ten bytes are read).
    fn varint(&mut self) -> u64 {
        let mut n = 0u64;
        let mut shift = 0;
        loop {
            let b = self.byte();
            n |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 || shift >= 63 {
                return n;
            }
            shift += 7;
        }
    }

    fn text(&mut self) -> &'a str {
        let n = self.len();
        let end = (self.pos + n).min(self.b.len());
        let s = std::str::from_utf8(&self.b[self.pos.min(end)..end]).unwrap_or("");
        self.pos = end;
        s
    }

    fn eight(&mut self) -> [u8; 8] {
        let mut a = [0u8; 8];
        if let Some(s) = self.b.get(self.pos..self.pos + 8) {
            a.copy_from_slice(s);
        }
        self.pos += 8;
        a
    }

    fn four(&mut self) -> [u8; 4] {
        let mut a = [0u8; 4];
        if let Some(s) = self.b.get(self.pos..self.pos + 4) {
            a.copy_from_slice(s);
        }
        self.pos += 4;
        a
    }

    /// A zigzag integer ([`put_int`]).
    fn int(&mut self) -> i64 {
        let n = self.varint();
        ((n >> 1) as i64) ^ -((n & 1) as i64)
    }

    /// The earlier value a [`T_AGAIN`] refers to (after its tag).
    fn again(&mut self) -> &'a [u8] {
        let start = self.len();
        let len = self.len();
        start
            .checked_add(len)
            .and_then(|end| self.b.get(start..end))
            .unwrap_or_default()
    }

    fn key(&mut self) -> &'a str {
        match self.byte() {
            K_CUSTOM => self.text(),
            i => KNOWN_FIELDS.get(usize::from(i)).copied().unwrap_or(""),
        }
    }

    /// Skips one packed value.
    fn skip(&mut self) {
        match self.byte() {
            T_INT => {
                self.int();
            }
            T_FLOAT => self.pos += 8,
            T_F32 => self.pos += 4,
            T_AGAIN => {
                self.again();
            }
            T_BIGINT | T_STR => {
                let n = self.len();
                self.pos += n;
            }
            T_STR_AGAIN => {
                self.len();
                self.len();
            }
            T_KNOWN_STR => self.pos += 1,
            T_LIST => {
                for _ in 0..self.len() {
                    self.skip();
                }
            }
            T_DICT => {
                for _ in 0..self.len() {
                    let n = self.len();
                    self.pos += n;
                    self.skip();
                }
            }
            _ => {}
        }
    }

    fn value(&mut self) -> ValRef<'a> {
        let start = self.pos;
        match self.b.get(self.pos).copied().unwrap_or(T_NONE) {
            T_LIST | T_DICT => {
                self.skip();
                return ValRef::Nested(&self.b[start..self.pos.min(self.b.len())]);
            }
            _ => {}
        }
        match self.byte() {
            T_FALSE => ValRef::Bool(false),
            T_TRUE => ValRef::Bool(true),
            T_INT => ValRef::Int(self.int()),
            T_BIGINT => ValRef::BigInt(self.text()),
            T_FLOAT => ValRef::Float(f64::from_le_bytes(self.eight())),
            T_F32 => ValRef::Float(f64::from(f32::from_le_bytes(self.four()))),
            // Only a list or dict is referred to (a nested reference would be empty).
            T_AGAIN => match self.again() {
                bytes @ [T_LIST | T_DICT, ..] => ValRef::Nested(bytes),
                _ => ValRef::None,
            },
            T_STR => ValRef::Str(self.text()),
            T_STR_AGAIN => {
                let start = self.len();
                let len = self.len();
                let bytes = start
                    .checked_add(len)
                    .and_then(|end| self.b.get(start..end))
                    .unwrap_or_default();
                ValRef::Str(std::str::from_utf8(bytes).unwrap_or(""))
            }
            T_KNOWN_STR => ValRef::Str(
                KNOWN_STRS
                    .get(usize::from(self.byte()))
                    .copied()
                    .unwrap_or(""),
            ),
            _ => ValRef::None,
        }
    }

    fn value_owned(&mut self) -> PyVal {
        match self.b.get(self.pos).copied().unwrap_or(T_NONE) {
            T_LIST => {
                self.pos += 1;
                let n = self.len();
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value_owned());
                }
                PyVal::List(items)
            }
            T_DICT => {
                self.pos += 1;
                let n = self.len();
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = self.text().to_string();
                    items.push((k, self.value_owned()));
                }
                PyVal::Dict(items)
            }
            _ => self.value().to_pyval(),
        }
    }
}

/// The fields of a packed item, in order.
pub struct Fields<'a> {
    r: Reader<'a>,
}

impl<'a> Iterator for Fields<'a> {
    type Item = (&'a str, ValRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.r.pos >= self.r.b.len() {
            return None;
        }
        let k = self.r.key();
        let v = self.r.value();
        Some((k, v))
    }
}

/// A field name of a packed item: its code when it is a known name ([`field_code`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FieldKey<'a> {
    pub code: Option<u8>,
    pub name: &'a str,
}

/// The fields of a packed item with their name codes, in order.
pub struct CodedFields<'a> {
    r: Reader<'a>,
}

impl<'a> Iterator for CodedFields<'a> {
    type Item = (FieldKey<'a>, ValRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.r.pos >= self.r.b.len() {
            return None;
        }
        let code = self.r.b[self.r.pos];
        let name = self.r.key();
        let code = (code != K_CUSTOM).then_some(code);
        Some((FieldKey { code, name }, self.r.value()))
    }
}

/// The code of a known field name (the same for every item; `None` for other names).
pub fn field_code(name: &str) -> Option<u8> {
    known_field(name).map(|i| i as u8)
}

/// The known field names, indexed by code.
pub fn known_field_names() -> &'static [&'static str] {
    &KNOWN_FIELDS
}

impl PackedItem {
    /// The fields in order, read in place, each name with its code.
    pub fn coded_fields(&self) -> CodedFields<'_> {
        CodedFields {
            r: Reader { b: &self.0, pos: 0 },
        }
    }

    /// Packs an item (fields in order, values with their Python types).
    pub fn pack(item: &Item) -> PackedItem {
        let mut out = Out::with_capacity(16 * item.fields.len());
        for (k, v) in &item.fields {
            match known_field(k) {
                Some(i) => out.push(i as u8),
                None => {
                    out.push(K_CUSTOM);
                    put_text(&mut out, k);
                }
            }
            put_value(&mut out, v);
        }
        out.finish()
    }

    /// The item that was packed.
    pub fn unpack(&self) -> Item {
        let mut r = Reader { b: &self.0, pos: 0 };
        let mut fields = Vec::new();
        while r.pos < r.b.len() {
            let k: FieldName = match r.b[r.pos] {
                K_CUSTOM => {
                    r.pos += 1;
                    Cow::Owned(r.text().to_string())
                }
                i => {
                    r.pos += 1;
                    Cow::Borrowed(KNOWN_FIELDS.get(usize::from(i)).copied().unwrap_or(""))
                }
            };
            fields.push((k, r.value_owned()));
        }
        Item { fields }
    }

    /// The fields in order, read in place.
    pub fn fields(&self) -> Fields<'_> {
        Fields {
            r: Reader { b: &self.0, pos: 0 },
        }
    }

    /// The value of a field.
    pub fn get(&self, key: &str) -> Option<ValRef<'_>> {
        self.fields().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Heap bytes held.
    pub fn heap_size(&self) -> usize {
        self.0.len()
    }
}

/// The items of one op, packed ([`crate::OpData`] with [`PackedItem`]s).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PackedOp {
    pub input: Vec<(String, PackedItem)>,
    pub output: Vec<(String, PackedItem)>,
}

impl PackedOp {
    pub fn pack(op: OpData) -> PackedOp {
        let pack = |v: Vec<(String, Item)>| -> Vec<(String, PackedItem)> {
            v.into_iter()
                .map(|(n, it)| (n, PackedItem::pack(&it)))
                .collect()
        };
        PackedOp {
            input: pack(op.input),
            output: pack(op.output),
        }
    }
}

/// Writes Python's `str()` of a packed value (`repr` inside lists and dicts). A writer, not a
/// string, so that a long list can go straight into an escaped row.
pub fn write_py_str(out: &mut dyn std::fmt::Write, v: ValRef) {
    match v {
        ValRef::Str(s) => {
            let _ = out.write_str(s);
        }
        other => write_py_repr(out, other),
    }
}

/// Writes Python's `repr()` of a packed value.
pub fn write_py_repr(out: &mut dyn std::fmt::Write, v: ValRef) {
    let _ = match v {
        ValRef::None => out.write_str("None"),
        ValRef::Bool(true) => out.write_str("True"),
        ValRef::Bool(false) => out.write_str("False"),
        ValRef::Int(i) => write!(out, "{i}"),
        ValRef::BigInt(s) => out.write_str(s),
        ValRef::Float(f) => {
            let mut s = String::with_capacity(24);
            crate::pyval::push_float_repr(&mut s, f);
            out.write_str(&s)
        }
        ValRef::Str(s) => out.write_str(&PyVal::Str(s.to_string()).py_repr()),
        ValRef::Nested(bytes) => {
            let mut r = Reader { b: bytes, pos: 0 };
            write_nested(out, &mut r);
            Ok(())
        }
    };
}

fn write_nested(out: &mut dyn std::fmt::Write, r: &mut Reader) {
    match r.b.get(r.pos).copied().unwrap_or(T_NONE) {
        T_LIST => {
            r.pos += 1;
            let n = r.len();
            let _ = out.write_str("[");
            for i in 0..n {
                if i > 0 {
                    let _ = out.write_str(", ");
                }
                write_nested(out, r);
            }
            let _ = out.write_str("]");
        }
        T_DICT => {
            r.pos += 1;
            let n = r.len();
            let _ = out.write_str("{");
            for i in 0..n {
                if i > 0 {
                    let _ = out.write_str(", ");
                }
                let k = r.text();
                let _ = out.write_str(&PyVal::Str(k.to_string()).py_repr());
                let _ = out.write_str(": ");
                write_nested(out, r);
            }
            let _ = out.write_str("}");
        }
        _ => {
            let v = r.value();
            write_py_repr(out, v);
        }
    }
}

/// [`crate::items::parse_op_fast`] with each item packed as it is made (for the usual tensor
/// leaf, straight from the JSON: see [`pack_leaf`]).
pub fn parse_op_packed(op_name: &str, entry: &JVal) -> PackedOp {
    let (input, output) = flatten(op_name, entry, &pack_leaf, &|item| PackedItem::pack(&item));
    PackedOp { input, output }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_flattening_equals_packing_the_flattened_items() {
        let text = br#"{"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0, "requires_grad": false, "data_name": "Functional.f.0.forward.input.0.pt"}, [{"type": "int", "value": 64}, null, 3]],
            "input_kwargs": {"inplace": {"type": "bool", "value": false}, "dim": {"type": "torch.Size", "value": [1]}},
            "output": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0, "requires_grad": true}],
            "parameters": {"weight": null}, "stack": "ignored"}"#;
        let entry = crate::fastjson::Parser::new(text).unwrap().value().unwrap();
        for name in [
            "Functional.f.0.forward",
            "Module.fc.Linear.parameters_grad.0",
        ] {
            assert_eq!(
                parse_op_packed(name, &entry),
                PackedOp::pack(crate::items::parse_op_fast(name, &entry)),
                "{name}"
            );
        }
    }

    #[test]
    fn round_trips_and_prints_like_pyval() {
        let item = Item {
            fields: vec![
                ("type".into(), PyVal::Str("torch.Tensor".into())),
                ("dtype".into(), PyVal::Str("torch.float32".into())),
                (
                    "shape".into(),
                    PyVal::List(vec![PyVal::Int(2), PyVal::Int(16)]),
                ),
                ("Max".into(), PyVal::Float(1e-5)),
                ("Min".into(), PyVal::Int(-3)),
                ("Mean".into(), PyVal::None),
                ("Norm".into(), PyVal::BigInt("18446744073709551615".into())),
                ("requires_grad".into(), PyVal::Str("True".into())),
                ("custom key".into(), PyVal::Bool(false)),
                (
                    "value".into(),
                    PyVal::Dict(vec![
                        ("a'b".into(), PyVal::List(vec![])),
                        ("x".into(), PyVal::Str("it's".into())),
                    ]),
                ),
                ("data_name".into(), PyVal::Str("é long name.pt".into())),
            ],
        };
        let p = PackedItem::pack(&item);
        assert_eq!(p.unpack(), item);
        for ((k, v), (pk, pv)) in item.fields.iter().zip(p.fields()) {
            assert_eq!(k, pk);
            let mut s = String::new();
            write_py_str(&mut s, pv);
            assert_eq!(s, v.py_str(), "{k}");
            assert_eq!(pv.to_pyval(), *v);
        }
        assert_eq!(p.get("Min"), Some(ValRef::Int(-3)));
        assert_eq!(p.get("nope"), None);
        assert!(p.heap_size() < 150, "{}", p.heap_size());
    }

    /// Regression: msprobe repeats a scalar's value in `Max`, `Min`,
    /// `Mean`, `Norm`; a long string is kept once per item, not once per field.
    #[test]
    fn a_long_string_repeated_in_an_item_is_kept_once() {
        let long = "x".repeat(10_000);
        let nested = PyVal::List(vec![PyVal::Str(long.clone()), PyVal::Str(long.clone())]);
        let mut fields = vec![("type".into(), PyVal::Str("str".into()))];
        for k in ["Max", "Min", "Mean", "Norm", "value"] {
            fields.push((k.into(), PyVal::Str(long.clone())));
        }
        fields.push(("custom".into(), nested.clone()));
        let item = Item { fields };
        let p = PackedItem::pack(&item);
        // Once at the top level, twice inside the list (read on its own bytes).
        assert!(p.heap_size() < 3 * long.len() + 100, "{}", p.heap_size());
        assert_eq!(p.unpack(), item);
        assert_eq!(p.get("Norm"), Some(ValRef::Str(&long)));
        assert_eq!(p.get("custom").map(ValRef::to_pyval), Some(nested));
        let pairs: Vec<_> = p.fields().map(|(k, _)| k).collect();
        assert_eq!(pairs.len(), 7);
    }

    /// Regression: a long list as a non-tensor's `value` is repeated by
    /// msprobe in `Max`, `Min`, `Mean`, `Norm`; packed once, read back five times, and small
    /// numbers take a byte or two each (not nine).
    #[test]
    fn a_long_list_repeated_in_an_item_is_kept_once() {
        let numbers: Vec<String> = (0..200_000).map(|i| (i % 50).to_string()).collect();
        let floats: Vec<&str> = vec!["1.5"; 50_000];
        for list in [numbers.join(","), floats.join(", ")] {
            let text = format!(r#"{{"input_args": [{{"type": "list", "value": [{list}]}}]}}"#);
            let entry = crate::fastjson::Parser::new(text.as_bytes())
                .unwrap()
                .value()
                .unwrap();
            assert!(matches!(
                entry.get("input_args").map(|a| a.elements().next()),
                Some(Some(_))
            ));
            let name = "Functional.f.0.forward";
            let packed = parse_op_packed(name, &entry);
            let item = &packed.input[0].1;
            assert!(
                item.heap_size() < list.len() * 3 / 2,
                "{} bytes for {} of text",
                item.heap_size(),
                list.len()
            );
            assert_eq!(
                packed,
                PackedOp::pack(crate::items::parse_op_fast(name, &entry))
            );
            let value = item.get("value").unwrap().to_pyval();
            for k in ["Max", "Min", "Mean", "Norm"] {
                assert_eq!(item.get(k).unwrap().to_pyval(), value, "{k}");
            }
            let mut shown = String::new();
            write_py_str(&mut shown, item.get("Norm").unwrap());
            assert_eq!(shown, value.py_str());
        }
    }

    #[test]
    fn ints_and_floats_round_trip_in_their_short_forms() {
        let values = [0, 1, -1, 63, -64, 64, 1 << 40, i64::MAX, i64::MIN];
        let mut fields: Vec<(FieldName, PyVal)> = values
            .iter()
            .map(|&i| ("value".into(), PyVal::Int(i)))
            .collect();
        for f in [
            1.5,
            0.1,
            -0.0,
            1e300,
            f64::NAN,
            f64::INFINITY,
            3.4e38,
            1e-45,
        ] {
            fields.push(("Max".into(), PyVal::Float(f)));
        }
        let item = Item { fields };
        let back = PackedItem::pack(&item).unpack();
        for ((_, a), (_, b)) in item.fields.iter().zip(&back.fields) {
            match (a, b) {
                (PyVal::Float(x), PyVal::Float(y)) => {
                    assert!(
                        x.to_bits() == y.to_bits() || x.is_nan() && y.is_nan(),
                        "{x}"
                    )
                }
                _ => assert_eq!(a, b),
            }
        }
    }

    #[test]
    fn lookups_find_every_known_string_and_nothing_else() {
        for (i, s) in KNOWN_STRS.iter().enumerate() {
            assert_eq!(known_str(s), Some(i), "{s}");
        }
        for (i, s) in KNOWN_FIELDS.iter().enumerate() {
            assert_eq!(known_field(s), Some(i), "{s}");
        }
        for s in [
            "",
            "torch.float64",
            "Torch.Tensor",
            "-2",
            "Maxx",
            "max",
            "data_nam",
            "md6",
        ] {
            assert_eq!(known_str(s), None, "{s}");
            assert_eq!(known_field(s), None, "{s}");
        }
        for (i, name) in [
            (F_DTYPE, "dtype"),
            (F_REQUIRES_GRAD, "requires_grad"),
            (F_DATA_NAME, "data_name"),
            (F_MD5, "md5"),
            (F_VALUE, "value"),
        ] {
            assert_eq!(KNOWN_FIELDS[usize::from(i)], name);
        }
        let stats: Vec<&str> = F_STATS
            .iter()
            .map(|&i| KNOWN_FIELDS[usize::from(i)])
            .collect();
        assert_eq!(stats, ["Max", "Min", "Mean", "Norm"]);
    }

    /// The direct packing of a leaf must equal packing msprobe's item for it, field by field and
    /// byte by byte, for the usual tensors and for every leaf that leaves the fast path.
    #[test]
    fn pack_leaf_equals_packing_the_item() {
        let leaves = [
            r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 16], "Max": 1.5, "Min": -3, "Mean": 0.25, "Norm": 7.0, "requires_grad": true, "data_name": "Module.a.forward.0.input.0.pt"}"#,
            r#"{"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [], "Max": NaN, "Min": -Infinity, "Mean": Infinity, "Norm": 18446744073709551615, "requires_grad": false}"#,
            r#"{"type": "torch.Tensor", "dtype": "torch.float16", "shape": [1], "data_name": "", "requires_grad": "True", "md5": "0badf00d"}"#,
            r#"{"type": "torch.Tensor", "dtype": "torch.int64", "shape": [3], "Max": null, "data_name": -1, "extra": {"nested": [1, "x", null, true]}}"#,
            r#"{"dtype": "torch.float32", "type": "torch.Tensor", "Norm": 1e-300, "Mean": 5e-324, "requires_grad": null, "md5": "00000000", "value": 3}"#,
            r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "md5": "12345678", "data_name": "x.npy", "Max": 1, "Min": 1, "Mean": 1, "Norm": 2}"#,
            // General path: no dtype, or a value without md5.
            r#"{"type": "int", "value": 64}"#,
            r#"{"type": "torch.Size", "value": [2, 3]}"#,
            r#"{"type": "slice", "value": [0, null, 2]}"#,
            r#"{"type": "ellipsis", "value": "..."}"#,
            r#"{"type": "torch.ProcessGroup", "group_ranks": [0, 1], "group_id": 7}"#,
            r#"{"type": "torch.Tensor", "dtype": "torch.float32", "value": 1.0}"#,
            // General path: a falsy md5 or dtype, which msprobe replaces.
            r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [0], "Max": null, "md5": null}"#,
            r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [0], "md5": ""}"#,
            r#"{"type": "torch.Tensor", "dtype": null, "shape": [2], "md5": "12345678"}"#,
        ];
        for text in leaves {
            let mut parser = crate::fastjson::Parser::new(text.as_bytes()).unwrap();
            let JVal::Obj(map) = parser.value().unwrap() else {
                panic!("not an object: {text}")
            };
            for name in [
                "Functional.f.0.forward.input.0",
                "Distributed.send.0.forward.input.dst",
            ] {
                let direct = pack_leaf(name, &map);
                let general = PackedItem::pack(&crate::items::leaf_item(name, &map));
                assert_eq!(
                    direct.0, general.0,
                    "{name}: {text}\n{direct:?}\n{general:?}"
                );
            }
        }
    }
}
