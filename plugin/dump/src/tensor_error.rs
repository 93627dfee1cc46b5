//! Why a tensor file cannot be read, and the bounds the tensor reader keeps.
//!
//! Apart from `tensor` so that [`crate::error::DumpError`] can carry the reason without the error
//! module and the reader importing each other; the bounds live here because the messages name them.

/// How deep pickle values may nest: a tensor's pickle nests about four levels.
pub(crate) const MAX_PICKLE_DEPTH: u32 = 64;

/// How many pickle values may be made in all, copies from the memo included: a tensor's pickle
/// makes a few dozen. Bounds memory against a memo that copies a value into itself again and
/// again (each round doubling it).
pub(crate) const MAX_PICKLE_VALUES: u64 = 1 << 16;

/// Elements a stride-0 (expanded) view may hold beyond its stored ones: 2^27 (1 GiB as `f64`).
/// A view with no more elements than its storage is always read, since its bytes are in the file.
pub(crate) const MAX_EXPANDED_ELEMENTS: usize = 1 << 27;

/// Why the bytes of a `.npy` or `.pt` file are not a tensor this reader can decode. The file's
/// path is added by [`DumpError::Tensor`].
#[derive(Debug, thiserror::Error)]
pub enum TensorFormatError {
    #[error("not a .npy file (bad magic)")]
    NpyMagic,
    #[error("unsupported .npy version {0}")]
    NpyVersion(u8),
    #[error("truncated .npy header")]
    NpyHeaderTruncated,
    #[error("no {0} in .npy header")]
    NpyHeaderField(&'static str),
    #[error("Fortran-ordered .npy arrays are not supported")]
    NpyFortranOrder,
    #[error("bad shape entry {0:?}")]
    NpyShapeEntry(String),
    #[error("big-endian .npy ({0}) is not supported")]
    NpyBigEndian(String),
    #[error("unsupported .npy dtype {0}")]
    NpyDtype(String),
    #[error("truncated .npy data: {len} bytes for shape {shape:?} of {dtype}")]
    NpyTruncated {
        len: usize,
        shape: Vec<usize>,
        dtype: &'static str,
    },
    #[error("truncated pickle")]
    PickleTruncated,
    #[error("pickle ends without STOP")]
    PickleNoStop,
    #[error("pickle values nest deeper than {MAX_PICKLE_DEPTH}")]
    PickleTooDeep,
    #[error("the pickle makes more than {MAX_PICKLE_VALUES} values")]
    PickleTooManyValues,
    #[error("pickle MARK missing")]
    PickleNoMark,
    #[error("pickle opcode 0x{0:02x} on an empty stack")]
    PickleEmptyStack(u8),
    #[error("STACK_GLOBAL needs two strings")]
    PickleStackGlobal,
    #[error("bad memo reference {0}")]
    PickleMemo(u32),
    #[error("BINPERSID needs a tuple")]
    PicklePersistentId,
    #[error("unsupported pickle opcode 0x{0:02x}")]
    PickleOpcode(u8),
    #[error("not a torch zip archive: {0}")]
    NotZip(#[source] zip::result::ZipError),
    #[error("no data.pkl in the archive")]
    NoPickle,
    #[error("{name}: {source}")]
    Member {
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the pickle does not hold a tensor")]
    NotATensor,
    #[error("unexpected _rebuild_tensor_v2 arguments")]
    RebuildArguments,
    #[error("unexpected storage reference")]
    StorageReference,
    #[error("unsupported storage {0}")]
    StorageType(String),
    #[error("size/stride must be a tuple of non-negative integers")]
    SizeEntries,
    #[error("size {shape:?} and stride {strides:?} have different lengths")]
    StrideLength {
        shape: Vec<usize>,
        strides: Vec<usize>,
    },
    #[error("negative offset {0}")]
    NegativeOffset(i64),
    #[error("shape {0:?} has more elements than memory can address")]
    TooManyElements(Vec<usize>),
    #[error("size {shape:?} with stride {strides:?} overflows")]
    ViewOverflow {
        shape: Vec<usize>,
        strides: Vec<usize>,
    },
    #[error(
        "storage {key} holds {stored} bytes, but size {shape:?} with stride {strides:?} from \
         offset {offset} reaches {needed}"
    )]
    StorageShort {
        key: String,
        stored: usize,
        shape: Vec<usize>,
        strides: Vec<usize>,
        offset: usize,
        needed: usize,
    },
    #[error(
        "size {shape:?} expands {stored} stored elements to {n}, more than {MAX_EXPANDED_ELEMENTS}"
    )]
    Expands {
        shape: Vec<usize>,
        stored: usize,
        n: usize,
    },
    #[error("{n} elements: {source}")]
    Allocation {
        n: usize,
        #[source]
        source: std::collections::TryReserveError,
    },
}
