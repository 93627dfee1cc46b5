//! A fast reader for `dump.json`: Python-flavoured JSON parsed straight into borrowed values.
//!
//! `dump.json` is by far the largest input (tens of MB), and going through `serde_json::Value`
//! costs an allocation for every key and string, a hash map per object and a full copy of the
//! file whenever it contains `NaN`/`Infinity`. This parser reads the bytes in place: strings
//! without escapes are borrowed, objects are small vectors, numbers are classified exactly as
//! `serde_json` classifies them (so that Python's `int`/`float` distinction is kept), and bare
//! `NaN`/`Infinity`/`-Infinity` are read as floats. Anything it does not accept is reported as an
//! error, and callers then fall back to the `serde_json` reader, which gives the user-facing
//! message: the fast path never decides what a bad file means.
//!
//! # Layout
//!
//! - `parse`: [`JVal`] and [`Parser`], JSON text to a value in place.
//! - `stream`: `dump.json` read through a window ([`read_dump_batches`] and the readers over
//!   it): the top-level walk, the header, the entries of `data` as raw JSON ([`EntryBatch`]).

mod parse;
mod stream;

pub use parse::{Elements, FastError, JVal, LazyArr, Parser, LAZY_ARRAY_BYTES, MAX_DEPTH};
pub use stream::{read_dump, read_dump_batches, read_dump_from, DumpHeader, EntryBatch};
