//! One entry of a node's `input_data` / `output_data`: a tensor's statistics, a non-tensor
//! argument's value, or a process group, read from the stringified JSON msprobe stores.
//!
//! Only what the rules need is kept, as numbers: the four statistics of each side, the tensor
//! mode metrics and the md5 text. Values are strings in msprobe's files (`"0.25"`, `"inf"`,
//! `"null"`) and sometimes numbers in other writers; both are read.

use std::sync::Arc;

use serde_json::{Map, Value};

/// Where an entry sits in the node's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// An argument of the call (tensor or not), `…input.N` / `…input.<kwarg>`.
    Input,
    /// A module's own parameter, `…parameters.<name>`.
    Parameter,
    /// A result, `…output.N`.
    Output,
}

/// What an entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A tensor with statistics.
    Tensor,
    /// A Python / MindSpore scalar, string, slice…: compared by value.
    Scalar,
    /// A process group, `None`, or anything else the rules do not compare.
    Ignored,
}

/// The numeric class of a dtype, which decides the noise a comparison tolerates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DtypeClass {
    /// Integers and booleans: exact.
    Exact,
    Float64,
    Float32,
    Float16,
    BFloat16,
    /// Unknown names (fp8 and such): treated as the least precise float.
    Other,
}

impl DtypeClass {
    /// Classifies a dtype name of either framework, ignoring how it is spelled
    /// (`torch.float32`, `Float32`, `float32` are the same: msprobe compares them as text and
    /// reports a false error; we do not).
    pub fn of(dtype: &str) -> DtypeClass {
        // Case-insensitive without a lowercase copy: a 1M-node compare classifies millions.
        let name = dtype
            .rsplit(['.', ' '])
            .next()
            .unwrap_or(dtype)
            .trim_end_matches(['>', '\'']);
        let is = |word: &str| name.eq_ignore_ascii_case(word);
        let starts = |prefix: &str| {
            name.as_bytes()
                .get(..prefix.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(prefix.as_bytes()))
        };
        if is("float64") || is("double") {
            DtypeClass::Float64
        } else if is("float32") || is("float") || is("tensorfloat32") {
            DtypeClass::Float32
        } else if is("float16") || is("half") {
            DtypeClass::Float16
        } else if is("bfloat16") {
            DtypeClass::BFloat16
        } else if starts("int") || starts("uint") || is("bool") || is("long") {
            DtypeClass::Exact
        } else {
            DtypeClass::Other
        }
    }

    /// The unit round-off of the class: the smallest relative difference it can show.
    pub fn epsilon(self) -> f64 {
        match self {
            DtypeClass::Exact => 0.0,
            DtypeClass::Float64 => f64::EPSILON,
            DtypeClass::Float32 => f32::EPSILON as f64,
            DtypeClass::Float16 => 9.765_625e-4,
            DtypeClass::BFloat16 | DtypeClass::Other => 7.812_5e-3,
        }
    }

    /// The less precise of two classes (the one whose noise a comparison must tolerate).
    pub fn coarser(self, other: DtypeClass) -> DtypeClass {
        self.max(other)
    }
}

/// `Max`, `Min`, `Mean`, `Norm` of one tensor (any may be absent; non-finite values are kept).
///
/// Four plain numbers, an absent one stored as a NaN that no parser or arithmetic produces (a
/// signalling NaN with its own payload): 32 bytes instead of four `Option<f64>`'s 64. A 1M-node
/// compare holds millions of these, and the fresh memory they fill is a large part of its load.
#[derive(Clone, Copy)]
pub struct Stats([f64; 4]);

/// The bits of an absent statistic.
const ABSENT: u64 = 0x7ff4_ab5e_47ab_5e47;

fn pack(v: Option<f64>) -> f64 {
    f64::from_bits(v.map_or(ABSENT, f64::to_bits))
}

impl Stats {
    pub fn new(max: Option<f64>, min: Option<f64>, mean: Option<f64>, norm: Option<f64>) -> Stats {
        Stats([pack(max), pack(min), pack(mean), pack(norm)])
    }

    fn get(&self, i: usize) -> Option<f64> {
        let v = self.0[i];
        (v.to_bits() != ABSENT).then_some(v)
    }

    pub fn max(&self) -> Option<f64> {
        self.get(0)
    }

    pub fn min(&self) -> Option<f64> {
        self.get(1)
    }

    pub fn mean(&self) -> Option<f64> {
        self.get(2)
    }

    pub fn norm(&self) -> Option<f64> {
        self.get(3)
    }

    /// The four, in the order max, min, mean, norm.
    pub fn all(&self) -> [Option<f64>; 4] {
        [self.max(), self.min(), self.mean(), self.norm()]
    }

    /// Whether any statistic is NaN or infinite (a Norm overflows before Max or Min do).
    pub fn has_non_finite(&self) -> bool {
        self.all().into_iter().flatten().any(|v| !v.is_finite())
    }
}

impl Default for Stats {
    /// All four absent.
    fn default() -> Stats {
        Stats::new(None, None, None, None)
    }
}

impl PartialEq for Stats {
    /// As four `Option<f64>`s compare.
    fn eq(&self, other: &Stats) -> bool {
        self.all() == other.all()
    }
}

impl std::fmt::Debug for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stats")
            .field("max", &self.max())
            .field("min", &self.min())
            .field("mean", &self.mean())
            .field("norm", &self.norm())
            .finish()
    }
}

/// The tensor-mode metrics msprobe stores on the target side of a matched pair.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TensorMetrics {
    pub cosine: Option<f64>,
    pub max_abs_err: Option<f64>,
}

/// One entry, as the rules see it: 40 bytes (a 1M-node compare holds millions).
///
/// Its statistics are its own; its key, role, kind, dtype, shape and the rare fields
/// ([`Entry::value`], [`Entry::md5`], [`Entry::metrics`]) are behind one shared pointer: a
/// graph's entries have few distinct keys with few distinct kinds, dtypes and shapes (its layers
/// repeat), and an entry holding a rare field has one of its own.
#[derive(Clone, PartialEq)]
pub struct Entry {
    pub stats: Stats,
    tail: Tail,
}

/// What an entry shares with the other entries of its key, kind and shape (see [`Entry`]).
#[derive(Clone, PartialEq)]
struct Tail(Arc<TailFields>);

#[derive(Debug, PartialEq)]
struct TailFields {
    /// The key without the node's name: `input.0`, `input.eps`, `parameters.weight`, `output.0`.
    name: EntryName,
    /// A hash of the shape as written without spaces (`[2,16]`); 0 when absent.
    shape: u64,
    role: Role,
    kind: Kind,
    dtype: DtypeClass,
    /// The dtype is spelled the PyTorch way (`torch.float32`), not MindSpore's (`Float32`).
    torch_dtype: bool,
    /// A scalar's value, the md5, the tensor-mode metrics.
    extra: Extra,
}

impl Tail {
    /// The tail of these fields: without rare fields, the same one as the last entries of
    /// those fields read on this thread (a bounded set of recent ones), so that the million
    /// `input.0`s of one shape of a large side share one.
    fn of(
        name: &str,
        shape: u64,
        role: Role,
        kind: Kind,
        dtype: DtypeClass,
        torch_dtype: bool,
        extra: Extra,
    ) -> Tail {
        use std::cell::RefCell;
        use std::hash::BuildHasher;
        /// Tails remembered per thread; the set starts again when full.
        const RECENT: usize = 4096;
        thread_local! {
            static RECENT_TAILS: RefCell<foldhash::HashMap<u64, Tail>> = RefCell::default();
        }
        let tail = |name: EntryName, extra: Extra| {
            Tail(Arc::new(TailFields {
                name,
                shape,
                role,
                kind,
                dtype,
                torch_dtype,
                extra,
            }))
        };
        if extra.0.is_some() {
            return tail(shared_name(name), extra);
        }
        let same = |t: &Tail| {
            let f = &t.0;
            *f.name == *name
                && f.shape == shape
                && f.role == role
                && f.kind == kind
                && f.dtype == dtype
                && f.torch_dtype == torch_dtype
                && f.extra.0.is_none()
        };
        let key = foldhash::fast::FixedState::with_seed(0x7a11).hash_one((
            name,
            shape,
            role as u8,
            kind as u8,
            dtype as u8,
            torch_dtype,
        ));
        RECENT_TAILS.with_borrow_mut(|recent| {
            if let Some(found) = recent.get(&key) {
                if same(found) {
                    return found.clone();
                }
                // Another tail of the same hash: this one is not shared.
                return tail(shared_name(name), extra);
            }
            if recent.len() >= RECENT {
                recent.clear();
            }
            let shared = tail(shared_name(name), extra);
            recent.insert(key, shared.clone());
            shared
        })
    }
}

impl Entry {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: &str,
        role: Role,
        kind: Kind,
        dtype: DtypeClass,
        torch_dtype: bool,
        stats: Stats,
        shape: u64,
        extra: Extra,
    ) -> Entry {
        Entry {
            stats,
            tail: Tail::of(name, shape, role, kind, dtype, torch_dtype, extra),
        }
    }

    /// The key without the node's name: `input.0`, `input.eps`, `parameters.weight`, `output.0`.
    pub fn name(&self) -> &str {
        &self.tail.0.name
    }

    /// A hash of the shape as written without spaces (`[2,16]`); 0 when absent. Only compared
    /// for equality.
    pub fn shape(&self) -> u64 {
        self.tail.0.shape
    }

    pub fn role(&self) -> Role {
        self.tail.0.role
    }

    pub fn kind(&self) -> Kind {
        self.tail.0.kind
    }

    pub fn dtype(&self) -> DtypeClass {
        self.tail.0.dtype
    }

    /// The dtype is spelled the PyTorch way (`torch.float32`), not MindSpore's (`Float32`).
    pub fn torch_dtype(&self) -> bool {
        self.tail.0.torch_dtype
    }

    /// The same entry with `extra` as its rare fields.
    pub fn with_extra(&self, extra: Extra) -> Entry {
        let f = &self.tail.0;
        Entry::new(
            &f.name,
            f.role,
            f.kind,
            f.dtype,
            f.torch_dtype,
            self.stats,
            f.shape,
            extra,
        )
    }

    /// A scalar's value as text.
    pub fn value(&self) -> Option<&str> {
        self.tail.0.extra.0.as_ref()?.value.as_deref()
    }

    /// The md5 (CRC32) text in md5 mode.
    pub fn md5(&self) -> Option<&str> {
        self.tail.0.extra.0.as_ref()?.md5.as_deref()
    }

    /// Tensor-mode metrics, when stored.
    pub fn metrics(&self) -> Option<&TensorMetrics> {
        self.tail.0.extra.0.as_ref()?.metrics.as_ref()
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = &self.tail.0;
        f.debug_struct("Entry")
            .field("name", &t.name)
            .field("role", &t.role)
            .field("kind", &t.kind)
            .field("dtype", &t.dtype)
            .field("torch_dtype", &t.torch_dtype)
            .field("stats", &self.stats)
            .field("shape", &t.shape)
            .field("extra", &t.extra)
            .finish()
    }
}

/// What few entries hold besides statistics: a scalar's value, an md5, tensor-mode metrics.
/// Behind one pointer, 8 bytes for all three, nothing more when there is none (most files'
/// entries are tensors with statistics alone).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extra(Option<Box<ExtraFields>>);

#[derive(Debug, Clone, PartialEq)]
struct ExtraFields {
    value: Option<Text>,
    md5: Option<Text>,
    metrics: Option<TensorMetrics>,
}

impl Extra {
    pub fn new(value: Option<Text>, md5: Option<Text>, metrics: Option<TensorMetrics>) -> Extra {
        if value.is_none() && md5.is_none() && metrics.is_none() {
            Extra(None)
        } else {
            Extra(Some(Box::new(ExtraFields {
                value,
                md5,
                metrics,
            })))
        }
    }
}

/// An entry's key, shared and behind one thin pointer (8 bytes): the entries of a graph have
/// few distinct keys, and a 1M-node compare holds millions of entries.
#[derive(Clone, PartialEq, Eq)]
pub struct EntryName(Arc<Box<str>>);

impl std::ops::Deref for EntryName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for EntryName {
    fn borrow(&self) -> &str {
        self
    }
}

impl std::hash::Hash for EntryName {
    /// As its text hashes (what [`std::borrow::Borrow`] requires).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
}

impl From<&str> for EntryName {
    fn from(name: &str) -> EntryName {
        EntryName(Arc::new(name.into()))
    }
}

impl std::fmt::Debug for EntryName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

/// `name` as a shared key: the same one as the last entries of that name read on this thread
/// (a bounded set of recent names), so that the million `input.0`s of a large side are one.
pub fn shared_name(name: &str) -> EntryName {
    use std::cell::RefCell;
    /// Names remembered per thread; the set starts again when full.
    const RECENT: usize = 1024;
    thread_local! {
        static RECENT_NAMES: RefCell<foldhash::HashSet<EntryName>> = RefCell::default();
    }
    RECENT_NAMES.with_borrow_mut(|recent| {
        if let Some(shared) = recent.get(name) {
            return shared.clone();
        }
        if recent.len() >= RECENT {
            recent.clear();
        }
        let shared = EntryName::from(name);
        recent.insert(shared.clone());
        shared
    })
}

/// A text behind one thin pointer: 8 bytes, and an absent one (`Option<Text>`) costs nothing
/// more. Most entries hold no value or md5, and a 1M-node compare holds millions of entries.
#[derive(Clone, PartialEq, Eq)]
pub struct Text(Box<Box<str>>);

impl std::ops::Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text(Box::new(s.into()))
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

/// A hash of a shape's text without whitespace (never 0).
pub fn shape_hash(shape: &str) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = foldhash::fast::FixedState::with_seed(0x5ea9e).build_hasher();
    for b in shape.bytes().filter(|b| !b.is_ascii_whitespace()) {
        h.write_u8(b);
    }
    h.finish().max(1)
}

/// A value as a number: JSON numbers, and strings such as `"0.25"`, `"inf"`, `"-inf"`, `"nan"`
/// (msprobe may append a tab to non-finite cells). `null`, `"null"`, `"N/A"`, booleans: none.
pub fn number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => number_text(s),
        _ => None,
    }
}

/// [`number`] of a string.
fn number_text(s: &str) -> Option<f64> {
    let t = s.trim();
    if let Ok(v) = t.parse::<f64>() {
        return Some(v);
    }
    let is = |word: &str| t.eq_ignore_ascii_case(word);
    if is("inf") || is("infinity") || is("+inf") {
        Some(f64::INFINITY)
    } else if is("-inf") || is("-infinity") {
        Some(f64::NEG_INFINITY)
    } else if is("nan") {
        Some(f64::NAN)
    } else {
        None
    }
}

fn text(v: Option<&Value>) -> Option<Text> {
    match v? {
        Value::String(s) => Some(s.as_str().into()),
        Value::Null => None,
        other => Some(other.to_string().as_str().into()),
    }
}

/// The role of a key, from the part after the node's name.
pub fn role_of(suffix: &str, in_output_data: bool) -> Role {
    if suffix.starts_with("parameters") || suffix.contains(".parameters.") {
        Role::Parameter
    } else if in_output_data || suffix.starts_with("output") {
        Role::Output
    } else {
        Role::Input
    }
}

/// Reads the entries of one JSON object (`input_data` or `output_data`) of node `node`.
pub fn parse_entries(node: &str, data: &Map<String, Value>, in_output_data: bool) -> Vec<Entry> {
    data.iter()
        .map(|(key, v)| {
            let empty = Map::new();
            let fields = v.as_object().unwrap_or(&empty);
            entry(node, key, in_output_data, fields)
        })
        .collect()
}

/// Reads the entries of one JSON text straight into [`Entry`]s, without building a JSON tree
/// (the load of a large file is mostly this). `None` when the text is not plain JSON of the
/// usual shape (bare `NaN`, an entry that is not an object…): the caller then parses it as a
/// tree, leniently, and reports errors by name.
pub fn parse_entries_text(node: &str, text: &str, in_output_data: bool) -> Option<Vec<Entry>> {
    let mut entries = Vec::new();
    parse_entries_text_into(node, text, in_output_data, &mut entries).then_some(entries)
}

/// [`parse_entries_text`] appending to `out` (the load reads a node's inputs and outputs into
/// one buffer, with no vector of their own); `false`, and `out` as it was, when it gives `None`.
pub fn parse_entries_text_into(
    node: &str,
    text: &str,
    in_output_data: bool,
    out: &mut Vec<Entry>,
) -> bool {
    if text.trim().is_empty() || scan_entries(node, text, in_output_data, out).is_some() {
        return true;
    }
    let Ok(raw) = serde_json::from_str::<RawEntries<'_>>(text) else {
        return false;
    };
    out.extend(
        raw.0
            .iter()
            .map(|(key, fields)| entry(node, key, in_output_data, fields)),
    );
    true
}

/// The entries of `text` read both ways apart: through the hand-written scanner alone (`None`:
/// it leaves the text to serde) and through serde's reader alone (`None`: serde refuses it).
/// [`parse_entries_text`] takes the scanner's when there is one, so the two must agree whenever
/// the scanner answers: what the tests and the fuzz target `entry_scanner` check.
pub fn read_both_ways(
    node: &str,
    text: &str,
    in_output_data: bool,
) -> (Option<Vec<Entry>>, Option<Vec<Entry>>) {
    let mut scanned = Vec::new();
    let scanned = scan_entries(node, text, in_output_data, &mut scanned).map(|()| scanned);
    let deserialized = serde_json::from_str::<RawEntries<'_>>(text)
        .ok()
        .map(|raw| {
            raw.0
                .iter()
                .map(|(key, fields)| entry(node, key, in_output_data, fields))
                .collect()
        });
    (scanned, deserialized)
}

/// The entries of one JSON text in the shape msprobe writes (an object of objects whose values
/// are all strings without escapes, or `null`), read by a scanner of its own: the serde reader's
/// work per field (a visitor, an `Option`, a match of the name) was a quarter of a 1M-node
/// compare's load. `None` for anything else (numbers, booleans, nested values, escapes, control
/// characters, a field given twice, text after the object): the serde reader then reads it, so
/// the scanner only ever answers what that reader would. The entries are appended to `out`
/// as they are read (`out` is left as it was on `None`).
fn scan_entries(node: &str, text: &str, in_output_data: bool, out: &mut Vec<Entry>) -> Option<()> {
    let before = out.len();
    let scanned = Scanner {
        text,
        bytes: text.as_bytes(),
        at: 0,
    }
    .entries(|key, raw| out.push(entry(node, key, in_output_data, &raw)));
    if scanned.is_none() {
        out.truncate(before);
    }
    scanned
}

/// The position of the first `"`, `\\` or control character in `bytes`, eight bytes at a time
/// (the scanner's inner loop: a 1M-node compare's entries are 1.5 GB of text).
fn string_end(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte below `n` (exact for the lowest such byte; a byte above one may
    // be marked too, by the borrow, which does not change the lowest).
    let below = |w: u64, n: u8| w.wrapping_sub(ONES * u64::from(n)) & !w & HIGH;
    let mut at = 0;
    for chunk in bytes.chunks_exact(8) {
        let w = u64::from_le_bytes(chunk.try_into().ok()?);
        let found = below(w ^ (ONES * u64::from(b'"')), 1)
            | below(w ^ (ONES * u64::from(b'\\')), 1)
            | below(w, 0x20);
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    bytes[at..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|p| at + p)
}

/// The position of [`scan_entries`] in its text.
struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scanner<'a> {
    /// The whole text: an object of entries, each given to `each` as it is read.
    fn entries(mut self, mut each: impl FnMut(&'a str, RawEntry<'a>)) -> Option<()> {
        self.eat(b'{')?;
        if !self.empty(b'}')? {
            loop {
                let key = self.string()?;
                self.eat(b':')?;
                each(key, self.entry()?);
                if self.close(b'}')? {
                    break;
                }
            }
        }
        self.skip_space();
        (self.at == self.bytes.len()).then_some(())
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after white space.
    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// After an opening: `true` (and past it) at the closing `end` at once.
    fn empty(&mut self, end: u8) -> Option<bool> {
        let at_end = self.peek()? == end;
        self.at += usize::from(at_end);
        Some(at_end)
    }

    /// After a member: `true` at the closing `end`, `false` after a comma, `None` otherwise.
    fn close(&mut self, end: u8) -> Option<bool> {
        match self.peek()? {
            b',' => {
                self.at += 1;
                Some(false)
            }
            b if b == end => {
                self.at += 1;
                Some(true)
            }
            _ => None,
        }
    }

    /// A string without escapes or control characters, borrowed from the text.
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let len = string_end(&self.bytes[start..])?;
        if self.bytes[start + len] != b'"' {
            return None;
        }
        self.at = start + len + 1;
        // Both ends are ASCII quotes: char boundaries.
        self.text.get(start..start + len)
    }

    /// A field's value: `Some(Some(text))` for a string, `Some(None)` for `null`.
    fn value(&mut self) -> Option<Option<&'a str>> {
        if self.peek()? == b'"' {
            return self.string().map(Some);
        }
        if self.bytes[self.at..].starts_with(b"null") {
            self.at += 4;
            return Some(None);
        }
        None
    }

    /// One entry's object.
    fn entry(&mut self) -> Option<RawEntry<'a>> {
        let mut raw = RawEntry::default();
        let mut seen = 0u16;
        self.eat(b'{')?;
        if self.empty(b'}')? {
            return Some(raw);
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            let value = self
                .value()?
                .map(|v| Field::Str(std::borrow::Cow::Borrowed(v)));
            let (bit, slot) = match key {
                "type" => (0, &mut raw.type_name),
                "dtype" => (1, &mut raw.dtype),
                "shape" => (2, &mut raw.shape),
                "Max" => (3, &mut raw.max),
                "Min" => (4, &mut raw.min),
                "Mean" => (5, &mut raw.mean),
                "Norm" => (6, &mut raw.norm),
                "value" => (7, &mut raw.value),
                "md5" => (8, &mut raw.md5),
                "Cosine" => (9, &mut raw.cosine),
                "MaxAbsErr" => (10, &mut raw.max_abs_err),
                _ => (16, &mut None),
            };
            if bit < 16 {
                // serde's reader refuses a field given twice.
                if seen & 1 << bit != 0 {
                    return None;
                }
                seen |= 1 << bit;
                *slot = value;
            }
            if self.close(b'}')? {
                return Some(raw);
            }
        }
    }
}

/// The fields of one entry that the rules read, however they are stored.
trait Fields {
    /// The field as a string (`None`: absent or not a string).
    fn str(&self, key: &str) -> Option<&str>;
    fn present(&self, key: &str) -> bool;
    fn num(&self, key: &str) -> Option<f64>;
    /// The field as text (numbers printed), `None` when absent or null.
    fn text(&self, key: &str) -> Option<Text>;
}

impl Fields for Map<String, Value> {
    fn str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }
    fn present(&self, key: &str) -> bool {
        self.contains_key(key)
    }
    fn num(&self, key: &str) -> Option<f64> {
        number(self.get(key))
    }
    fn text(&self, key: &str) -> Option<Text> {
        text(self.get(key))
    }
}

/// One JSON value of an entry's field, borrowed from the text when it can be.
enum Field<'a> {
    Str(std::borrow::Cow<'a, str>),
    Num(f64),
    Other(String),
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Field<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Field<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Field<'de>, E> {
                Ok(Field::Str(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Field<'de>, E> {
                Ok(Field::Str(std::borrow::Cow::Owned(v.to_owned())))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Field<'de>, E> {
                Ok(Field::Num(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Field<'de>, E> {
                Ok(Field::Num(v as f64))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Field<'de>, E> {
                Ok(Field::Num(v as f64))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Field<'de>, E> {
                Ok(Field::Other(if v { "True" } else { "False" }.to_owned()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Field<'de>, A::Error> {
                while a.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Field::Other(String::new()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Field<'de>, A::Error> {
                while a
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Field::Other(String::new()))
            }
        }
        d.deserialize_any(V)
    }
}

/// The fields the rules read; the others are skipped unparsed. (A JSON `null` reads as absent:
/// msprobe writes nulls as the string `"null"`.)
#[derive(serde::Deserialize, Default)]
struct RawEntry<'a> {
    #[serde(borrow, rename = "type")]
    type_name: Option<Field<'a>>,
    #[serde(borrow)]
    dtype: Option<Field<'a>>,
    #[serde(borrow)]
    shape: Option<Field<'a>>,
    #[serde(borrow, rename = "Max")]
    max: Option<Field<'a>>,
    #[serde(borrow, rename = "Min")]
    min: Option<Field<'a>>,
    #[serde(borrow, rename = "Mean")]
    mean: Option<Field<'a>>,
    #[serde(borrow, rename = "Norm")]
    norm: Option<Field<'a>>,
    #[serde(borrow)]
    value: Option<Field<'a>>,
    #[serde(borrow)]
    md5: Option<Field<'a>>,
    #[serde(borrow, rename = "Cosine")]
    cosine: Option<Field<'a>>,
    #[serde(borrow, rename = "MaxAbsErr")]
    max_abs_err: Option<Field<'a>>,
}

impl<'a> RawEntry<'a> {
    fn field(&self, key: &str) -> Option<&Field<'a>> {
        match key {
            "type" => self.type_name.as_ref(),
            "dtype" => self.dtype.as_ref(),
            "shape" => self.shape.as_ref(),
            "Max" => self.max.as_ref(),
            "Min" => self.min.as_ref(),
            "Mean" => self.mean.as_ref(),
            "Norm" => self.norm.as_ref(),
            "value" => self.value.as_ref(),
            "md5" => self.md5.as_ref(),
            "Cosine" => self.cosine.as_ref(),
            "MaxAbsErr" => self.max_abs_err.as_ref(),
            _ => None,
        }
    }
}

impl Fields for RawEntry<'_> {
    fn str(&self, key: &str) -> Option<&str> {
        match self.field(key)? {
            Field::Str(s) => Some(s),
            _ => None,
        }
    }
    fn present(&self, key: &str) -> bool {
        self.field(key).is_some()
    }
    fn num(&self, key: &str) -> Option<f64> {
        match self.field(key)? {
            Field::Num(n) => Some(*n),
            Field::Str(s) => number_text(s),
            Field::Other(_) => None,
        }
    }
    fn text(&self, key: &str) -> Option<Text> {
        match self.field(key)? {
            Field::Str(s) => Some((**s).into()),
            Field::Num(n) => Some(Value::from(*n).to_string().as_str().into()),
            Field::Other(s) => Some(s.as_str().into()),
        }
    }
}

/// The entries of one column in file order.
struct RawEntries<'a>(Vec<(std::borrow::Cow<'a, str>, RawEntry<'a>)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for RawEntries<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawEntries<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of entries")
            }
            fn visit_unit<E>(self) -> Result<RawEntries<'de>, E> {
                Ok(RawEntries(Vec::new()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<RawEntries<'de>, A::Error> {
                let mut out = Vec::with_capacity(a.size_hint().unwrap_or(4));
                while let Some((k, v)) =
                    a.next_entry::<std::borrow::Cow<'de, str>, RawEntry<'de>>()?
                {
                    out.push((k, v));
                }
                Ok(RawEntries(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// One entry from its key and fields.
fn entry(node: &str, key: &str, in_output_data: bool, f: &impl Fields) -> Entry {
    let name = key
        .strip_prefix(node)
        .and_then(|s| s.strip_prefix('.'))
        .unwrap_or(key);
    let role = role_of(name, in_output_data);
    let type_name = f.str("type").unwrap_or("");
    let dtype_text = f.str("dtype").unwrap_or("");
    let kind = if type_name.ends_with("ProcessGroup") || type_name.is_empty() && !f.present("Max") {
        Kind::Ignored
    } else if type_name.ends_with("Tensor") || type_name.ends_with("Parameter") {
        Kind::Tensor
    } else if f.present("value") || dtype_text.contains("class") {
        Kind::Scalar
    } else if f.present("shape") && f.present("Max") {
        Kind::Tensor
    } else {
        Kind::Ignored
    };
    let stats = Stats::new(f.num("Max"), f.num("Min"), f.num("Mean"), f.num("Norm"));
    let metrics = (f.present("Cosine") || f.present("MaxAbsErr")).then(|| TensorMetrics {
        cosine: f.num("Cosine"),
        max_abs_err: f.num("MaxAbsErr"),
    });
    let value = match kind {
        Kind::Scalar => f.text("value").or_else(|| f.text("Max")),
        _ => None,
    };
    let dtype = if kind == Kind::Scalar {
        DtypeClass::Exact
    } else {
        DtypeClass::of(dtype_text)
    };
    Entry::new(
        name,
        role,
        kind,
        dtype,
        dtype_text.starts_with("torch."),
        stats,
        f.str("shape").map_or(0, shape_hash),
        Extra::new(value, f.text("md5"), metrics),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_fast_reader_and_the_tree_agree() {
        let text = r#"{"N.0.forward.input.0": {"type": "torch.Tensor", "dtype": "torch.float32",
            "shape": "[2, 16]", "Max": "inf", "Min": -1, "Mean": "null", "Norm": "2.5",
            "requires_grad": "True", "Cosine": "0.99", "MaxAbsErr": "N/A", "extra": [1, {"a": 2}]},
            "N.0.forward.input.eps": {"type": "float", "value": "1e-05", "dtype": "<class float>"},
            "N.0.forward.input.flag": {"type": "bool", "value": true},
            "N.0.forward.input.3": {"value": "null"},
            "N.0.forward.parameters.weight": {"type": "mindspore.Tensor", "dtype": "Float32",
            "shape": "[2]", "Max": "1\u002e5", "md5": "00ab"}}"#;
        let fast = parse_entries_text("N.0.forward", text, false).expect("fast reader");
        let tree: Value = serde_json::from_str(text).unwrap();
        let slow = parse_entries("N.0.forward", tree.as_object().unwrap(), false);
        assert_eq!(fast.len(), 5);
        for (a, b) in fast.iter().zip(&slow) {
            assert_eq!(a.name(), b.name());
            assert_eq!(
                (a.role(), a.kind(), a.dtype(), a.shape()),
                (b.role(), b.kind(), b.dtype(), b.shape())
            );
            assert_eq!(format!("{:?}", a.stats), format!("{:?}", b.stats));
            assert_eq!(a.md5(), b.md5());
            assert_eq!(a.metrics(), b.metrics());
            assert_eq!(
                a.value().map(str::to_lowercase),
                b.value().map(str::to_lowercase)
            );
        }
        assert_eq!(fast[4].stats.max(), Some(1.5));
        // Bare NaN is not JSON: the caller falls back to the lenient tree.
        assert!(parse_entries_text("N", r#"{"N.input.0": {"Max": NaN}}"#, false).is_none());
        assert_eq!(parse_entries_text("N", "", false).map(|v| v.len()), Some(0));
    }

    #[test]
    fn entries_read_into_a_buffer_are_appended_and_a_refused_text_leaves_it_as_it_was() {
        let first =
            r#"{"N.input.0": {"type": "torch.Tensor", "dtype": "torch.float32", "Max": "1"}}"#;
        // The scanner reads the first entry, then refuses the number: serde reads them all.
        let mixed = r#"{"N.output.0": {"Max": "2"}, "N.output.1": {"Max": 3, "Min": "0"}}"#;
        // Neither reads a bare NaN after a good entry.
        let refused = r#"{"N.output.0": {"Max": "2"}, "N.output.1": {"Max": NaN}}"#;
        let mut out = Vec::new();
        assert!(parse_entries_text_into("N", first, false, &mut out));
        assert!(parse_entries_text_into("N", mixed, true, &mut out));
        assert!(!parse_entries_text_into("N", refused, true, &mut out));
        let names: Vec<&str> = out.iter().map(|e| e.name()).collect();
        assert_eq!(names, ["input.0", "output.0", "output.1"]);
        assert_eq!(out[2].stats.max(), Some(3.0));
        assert_eq!(out[2].stats.min(), Some(0.0));
        assert_eq!(
            out[1..],
            parse_entries_text("N", mixed, true).expect("mixed")[..]
        );
        let (scanned, deserialized) = read_both_ways("N", mixed, true);
        assert_eq!((scanned, deserialized.map(|d| d.len())), (None, Some(2)));
    }

    /// The entries of `text` through the scanner, or `None` where it leaves the text to serde.
    fn scanned(node: &str, text: &str, output: bool) -> Option<String> {
        read_both_ways(node, text, output)
            .0
            .map(|entries| format!("{entries:?}"))
    }

    /// The entries of `text` through serde's reader alone.
    fn deserialized(node: &str, text: &str, output: bool) -> Option<String> {
        read_both_ways(node, text, output)
            .1
            .map(|entries| format!("{entries:?}"))
    }

    /// Every `input_data` and `output_data` of every compare file msprobe wrote among the
    /// fixtures (statistics, md5, tensor mode; PyTorch and MindSpore; ranks, steps, overflow)
    /// reads the same through the scanner as through serde, and the scanner reads most of them.
    #[test]
    fn the_scanner_reads_what_serde_reads() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/upstream_vis");
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut texts, mut by_scanner) = (0, 0);
        let mut files = 0;
        for folder in std::fs::read_dir(&root).expect("upstream_vis").flatten() {
            if !folder.file_name().to_string_lossy().starts_with("compare_") {
                continue;
            }
            for file in std::fs::read_dir(folder.path()).expect("folder").flatten() {
                let path = file.path();
                if !path.to_string_lossy().ends_with(".vis.db.xz") {
                    continue;
                }
                let mut db = Vec::new();
                let mut input = std::io::BufReader::new(std::fs::File::open(&path).expect("open"));
                lzma_rs::xz_decompress(&mut input, &mut db).expect("decompress");
                let copy = dir.path().join(format!("{files}.vis.db"));
                std::fs::write(&copy, db).expect("write");
                files += 1;
                let conn = rusqlite::Connection::open(&copy).expect("sqlite");
                let mut stmt = conn
                    .prepare("SELECT node_name, input_data, output_data FROM tb_nodes")
                    .expect("query");
                let rows = stmt
                    .query_map([], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                            r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                        ))
                    })
                    .expect("rows");
                for row in rows {
                    let (node, input, output) = row.expect("row");
                    for (text, out) in [(&input, false), (&output, true)] {
                        if text.trim().is_empty() {
                            continue;
                        }
                        texts += 1;
                        if let Some(fast) = scanned(&node, text, out) {
                            by_scanner += 1;
                            assert_eq!(
                                Some(fast),
                                deserialized(&node, text, out),
                                "{node}: {text}"
                            );
                        }
                    }
                }
            }
        }
        assert!(files >= 20, "{files} compare files");
        // Only texts with escapes (a stack's quotes, Windows paths) are left to serde.
        assert!(by_scanner * 10 > texts * 9, "{by_scanner} of {texts}");
    }

    #[test]
    fn a_string_ends_at_its_first_quote_backslash_or_control_character() {
        let simple = |b: &[u8]| b.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20);
        let specials = [b'"', b'\\', 0x00, 0x1f, b'\t'];
        let plain = [b'a', b' ', 0x7f, 0x80, 0xff, 0x21, 0x5b, 0x5d, 0x20];
        for len in 0..20 {
            for at in 0..=len {
                for &special in &specials {
                    for &fill in &plain {
                        let mut bytes = vec![fill; len];
                        if at < len {
                            bytes[at] = special;
                            // A second one later changes nothing.
                            if at + 2 < len {
                                bytes[at + 2] = b'"';
                            }
                        }
                        assert_eq!(string_end(&bytes), simple(&bytes), "{bytes:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_scanner_leaves_what_it_does_not_know_to_serde() {
        let read = |text: &str| scanned("N", text, false);
        let entry = r#"{"N.input.0": {"type": "torch.Tensor", "Max": "1.5", "x": null}}"#;
        assert_eq!(read(entry), deserialized("N", entry, false));
        assert!(read(entry).is_some());
        assert_eq!(read(" { } "), deserialized("N", " { } ", false));
        assert_eq!(
            read(r#"{"N.input.0": {}}"#),
            deserialized("N", r#"{"N.input.0": {}}"#, false)
        );
        // Same key twice at the top: both kept, as serde's reader keeps them.
        let twice = r#"{"N.input.0": {"Max": "1"}, "N.input.0": {"Max": "2"}}"#;
        assert_eq!(read(twice), deserialized("N", twice, false));
        for other in [
            r#"{"N.input.0": {"Max": 1.5}}"#,
            r#"{"N.input.0": {"Max": true}}"#,
            r#"{"N.input.0": {"shape": [2, 3]}}"#,
            r#"{"N.input.0": {"x": {"y": "z"}}}"#,
            r#"{"N.input.0": {"value": "a\"b"}}"#,
            r#"{"N.input.\u0030": {"Max": "1"}}"#,
            r#"{"N.input.0": {"Max": "1", "Max": "2"}}"#,
            r#"{"N.input.0": null}"#,
            r#"{"N.input.0": {"Max": "1"}} x"#,
            r#"{"N.input.0": {"Max": "1"},}"#,
            r#"{"N.input.0": {"Max": nullx}}"#,
            "{\"N.input.0\": {\"value\": \"a\tb\"}}",
            "null",
            r#"{"N.input.0": {"Max": "1"}"#,
        ] {
            assert_eq!(read(other), None, "{other}");
        }
    }

    #[test]
    fn statistics_keep_absent_and_non_finite_values_apart() {
        let s = Stats::new(Some(f64::NAN), None, Some(f64::INFINITY), Some(-0.0));
        assert!(s.max().is_some_and(f64::is_nan));
        assert_eq!(s.min(), None);
        assert_eq!(s.mean(), Some(f64::INFINITY));
        assert_eq!(s.norm().map(f64::to_bits), Some((-0.0f64).to_bits()));
        assert!(s.has_non_finite());
        assert_eq!(Stats::default().all(), [None; 4]);
        assert!(!Stats::default().has_non_finite());
        // Whatever a file says, a parsed NaN is never taken for an absent value.
        for text in ["nan", "NaN", "-nan"] {
            let v = number_text(text).expect("a number");
            assert!(
                Stats::new(Some(v), None, None, None).max().is_some(),
                "{text}"
            );
        }
        assert!(std::mem::size_of::<Stats>() <= 32);
    }

    #[test]
    fn dtype_names_of_both_frameworks_are_the_same_class() {
        assert_eq!(DtypeClass::of("torch.float32"), DtypeClass::Float32);
        assert_eq!(DtypeClass::of("Float32"), DtypeClass::Float32);
        assert_eq!(DtypeClass::of("torch.bfloat16"), DtypeClass::BFloat16);
        assert_eq!(DtypeClass::of("BFloat16"), DtypeClass::BFloat16);
        assert_eq!(DtypeClass::of("torch.int64"), DtypeClass::Exact);
        assert_eq!(DtypeClass::of("Int64"), DtypeClass::Exact);
        assert_eq!(DtypeClass::of("torch.float8_e4m3fn"), DtypeClass::Other);
    }

    #[test]
    fn numbers_are_read_from_msprobe_strings() {
        assert_eq!(number(Some(&json!("0.25"))), Some(0.25));
        assert_eq!(number(Some(&json!("inf\t"))), Some(f64::INFINITY));
        assert_eq!(number(Some(&json!("-inf"))), Some(f64::NEG_INFINITY));
        assert!(number(Some(&json!("nan"))).is_some_and(f64::is_nan));
        assert_eq!(number(Some(&json!("null"))), None);
        assert_eq!(number(Some(&json!("N/A"))), None);
        assert_eq!(number(Some(&json!(3))), Some(3.0));
    }

    #[test]
    fn entries_get_their_role_and_kind() {
        let data = json!({
            "F.layer_norm.0.forward.input.0": {"type": "torch.Tensor", "dtype": "torch.float32",
                "shape": "[2]", "Max": "1.0", "Min": "-1.0", "Mean": "0.0", "Norm": "1.4"},
            "F.layer_norm.0.forward.input.4": {"type": "float", "value": "1e-05",
                "dtype": "<class float>", "shape": "[]", "Max": "1e-05"},
            "F.layer_norm.0.forward.input.group": {"type": "torch.ProcessGroup", "group_ranks": "[0, 1]"},
            "F.layer_norm.0.forward.parameters.weight": {"type": "torch.Tensor",
                "dtype": "torch.float32", "shape": "[2]", "Max": "1.0"},
            "F.layer_norm.0.forward.input.3": {"value": "null"}
        });
        let entries = parse_entries("F.layer_norm.0.forward", data.as_object().unwrap(), false);
        let kinds: Vec<(&str, Role, Kind)> = entries
            .iter()
            .map(|e| (e.name(), e.role(), e.kind()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("input.0", Role::Input, Kind::Tensor),
                ("input.4", Role::Input, Kind::Scalar),
                ("input.group", Role::Input, Kind::Ignored),
                ("parameters.weight", Role::Parameter, Kind::Tensor),
                ("input.3", Role::Input, Kind::Ignored),
            ]
        );
        assert_eq!(entries[1].value(), Some("1e-05"));
        assert_eq!(entries[0].stats.norm(), Some(1.4));
    }
}
