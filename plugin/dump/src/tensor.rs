//! Real tensors of `task: tensor` dumps: `.npy` (MindSpore) and PyTorch `.pt` files.
//!
//! A `.pt` file is a zip archive holding `data.pkl` (a pickle that calls
//! `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, …)`) and one raw little-endian
//! file per storage. The pickle is read by a small pickle machine that knows only the opcodes
//! `torch.save` emits; nothing is executed. Values are widened to `f64` for the metrics, as
//! msprobe does (`bfloat16` → float first).

use std::io::Read;
use std::path::Path;

use crate::error::DumpError;
pub use crate::tensor_error::TensorFormatError;
use crate::tensor_error::{MAX_EXPANDED_ELEMENTS, MAX_PICKLE_DEPTH, MAX_PICKLE_VALUES};

use TensorFormatError as E;

/// A tensor as the comparator needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    /// Elements in row-major order.
    pub data: Vec<f64>,
    /// Element type (`float32`, `float16`, `bfloat16`, `float64`, `int64`, …).
    pub dtype: &'static str,
}

impl Tensor {
    /// Reads a `.npy` or `.pt` file (by extension).
    pub fn read(path: &Path, confine: &crate::confine::Confine) -> Result<Tensor, DumpError> {
        let bytes = confine.read(path)?;
        Tensor::parse(path, &bytes)
    }

    /// Parses the bytes of a `.npy` or `.pt` file (by the extension of `path`, which errors name).
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Tensor, DumpError> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("npy") => read_npy(bytes).map_err(|e| DumpError::tensor(path, e)),
            _ => read_pt(bytes).map_err(|e| DumpError::tensor(path, e)),
        }
    }

    /// The shape without size-1 dimensions (`np.squeeze`).
    pub fn squeezed_shape(&self) -> Vec<usize> {
        self.shape.iter().copied().filter(|d| *d != 1).collect()
    }

    /// `true` for float64 tensors (their epsilon is f64's).
    pub fn is_f64(&self) -> bool {
        self.dtype == "float64"
    }
}

/// `(dtype name, element size)` → decoder of one little-endian element.
fn decode(dtype: &str, b: &[u8]) -> f64 {
    match dtype {
        "float32" => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        "float64" => f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        "float16" => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
        "bfloat16" => half::bf16::from_le_bytes([b[0], b[1]]).to_f64(),
        "int8" => b[0] as i8 as f64,
        "uint8" => b[0] as f64,
        "bool" => f64::from(u8::from(b[0] != 0)),
        "int16" => i16::from_le_bytes([b[0], b[1]]) as f64,
        "int32" => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        "int64" => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f64,
        "uint16" => u16::from_le_bytes([b[0], b[1]]) as f64,
        "uint32" => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        "uint64" => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f64,
        _ => f64::NAN,
    }
}

fn elem_size(dtype: &str) -> usize {
    match dtype {
        "float64" | "int64" | "uint64" => 8,
        "float32" | "int32" | "uint32" => 4,
        "float16" | "bfloat16" | "int16" | "uint16" => 2,
        _ => 1,
    }
}

// ---------------------------------------------------------------------------------------------
// .npy

fn read_npy(bytes: &[u8]) -> Result<Tensor, E> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(E::NpyMagic);
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(E::NpyVersion(v)),
    };
    let header = bytes
        .get(start..start + header_len)
        .ok_or(E::NpyHeaderTruncated)?;
    let header = String::from_utf8_lossy(header);
    let field = |key: &str| -> Option<String> {
        let i = header.find(&format!("'{key}'"))?;
        let rest = &header[i + key.len() + 2..];
        let rest = rest.trim_start().strip_prefix(':')?.trim_start();
        if let Some(r) = rest.strip_prefix('\'') {
            r.find('\'').map(|j| r[..j].to_string())
        } else if let Some(r) = rest.strip_prefix('(') {
            r.find(')').map(|j| r[..j].to_string())
        } else {
            rest.find([',', '}']).map(|j| rest[..j].trim().to_string())
        }
    };
    let descr = field("descr").ok_or(E::NpyHeaderField("descr"))?;
    if field("fortran_order").as_deref() == Some("True") {
        return Err(E::NpyFortranOrder);
    }
    let shape: Vec<usize> = field("shape")
        .ok_or(E::NpyHeaderField("shape"))?
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| E::NpyShapeEntry(s.to_string()))
        })
        .collect::<Result<_, _>>()?;
    if descr.starts_with('>') {
        return Err(E::NpyBigEndian(descr));
    }
    let dtype: &'static str = match descr.trim_start_matches(['<', '|', '=']) {
        "f4" => "float32",
        "f8" => "float64",
        "f2" => "float16",
        "i1" => "int8",
        "u1" => "uint8",
        "b1" => "bool",
        "i2" => "int16",
        "i4" => "int32",
        "i8" => "int64",
        "u2" => "uint16",
        "u4" => "uint32",
        "u8" => "uint64",
        other => return Err(E::NpyDtype(other.to_string())),
    };
    let size = elem_size(dtype);
    let data = &bytes[start + header_len..];
    let n = element_count(&shape)?;
    let needed = n
        .checked_mul(size)
        .filter(|needed| *needed <= data.len())
        .ok_or_else(|| E::NpyTruncated {
            len: data.len(),
            shape: shape.clone(),
            dtype,
        })?;
    let values = data[..needed]
        .chunks_exact(size)
        .map(|c| decode(dtype, c))
        .collect();
    Ok(Tensor {
        shape,
        data: values,
        dtype,
    })
}

// ---------------------------------------------------------------------------------------------
// .pt

/// Pickle values (only what `torch.save` of a tensor produces).
#[derive(Debug, Clone)]
#[allow(dead_code)] // payloads are kept for error messages and debugging
enum P {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Tuple(Vec<P>),
    List(Vec<P>),
    Dict,
    Global(String, String),
    Call(Box<P>, Vec<P>),
    Persistent(Vec<P>),
    Mark,
}

/// What a value on the pickle machine's stack costs: how deep it nests and how many values it
/// holds (itself included).
#[derive(Debug, Clone, Copy)]
struct Cost {
    depth: u32,
    values: u64,
}

const LEAF: Cost = Cost {
    depth: 1,
    values: 1,
};

/// Runs a pickle. Values are bounded in depth and number ([`MAX_PICKLE_DEPTH`],
/// [`MAX_PICKLE_VALUES`]), so that neither building nor dropping them can exhaust the stack or
/// the memory, whatever the bytes.
fn run_pickle(data: &[u8]) -> Result<P, E> {
    let mut machine = Pickle {
        data,
        pos: 0,
        stack: Vec::new(),
        memo: std::collections::HashMap::new(),
        made: 0,
    };
    loop {
        let op = machine.byte().map_err(|_| E::PickleNoStop)?;
        if op == b'.' {
            return machine
                .stack
                .pop()
                .map(|(p, _)| p)
                .ok_or(E::PickleEmptyStack(op));
        }
        if let Some(p) = machine.step(op)? {
            let cost = machine.account(&[], false)?;
            machine.stack.push((p, cost));
        }
    }
}

/// The pickle machine: the bytes and where it reads them, its stack and memo (each value with
/// its [`Cost`]), and how many values it has made.
struct Pickle<'a> {
    data: &'a [u8],
    pos: usize,
    stack: Vec<(P, Cost)>,
    memo: std::collections::HashMap<u32, (P, Cost)>,
    made: u64,
}

/// The costs of `items`, in order.
fn costs(items: &[(P, Cost)]) -> Vec<Cost> {
    items.iter().map(|(_, c)| *c).collect()
}

/// The values of `items`, in order.
fn values(items: Vec<(P, Cost)>) -> Vec<P> {
    items.into_iter().map(|(p, _)| p).collect()
}

/// `N` bytes as an array, for the fixed-size integers and floats.
fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[..N]);
    out
}

impl<'a> Pickle<'a> {
    /// Runs opcode `op` (all but STOP): `Some` is a new value for the stack, which the caller
    /// accounts for and pushes; the other opcodes change the stack or the memo themselves.
    fn step(&mut self, op: u8) -> Result<Option<P>, E> {
        match op {
            // PROTO, FRAME: nothing to do with their argument.
            0x80 => self.skip(1),
            0x95 => self.skip(8),
            b'c' | 0x93 => self.global(op).map(Some),
            b'X' | 0x8c => self.string(op).map(Some),
            b'J' | b'K' | b'M' | 0x8a | b'G' => self.number(op).map(Some),
            0x88 => Ok(Some(P::Bool(true))),
            0x89 => Ok(Some(P::Bool(false))),
            b'N' => Ok(Some(P::None)),
            b'q' | b'r' | 0x94 => self.memo_put(op),
            b'h' | b'j' => self.memo_get(op),
            b'(' => {
                self.stack.push((P::Mark, LEAF));
                Ok(None)
            }
            b')' => Ok(Some(P::Tuple(Vec::new()))),
            b't' | 0x85..=0x87 => self.tuple(op),
            b'}' => Ok(Some(P::Dict)),
            b']' => Ok(Some(P::List(Vec::new()))),
            b's' | b'u' => self.set_items(op),
            b'a' | b'e' => self.append(op),
            b'Q' => self.persistent_id(),
            b'R' | 0x81 => self.call(op),
            // BUILD: the state of an object is not needed.
            b'b' => {
                self.stack.pop();
                Ok(None)
            }
            other => Err(E::PickleOpcode(other)),
        }
    }

    /// Accounts for a value about to be pushed: `parts` are what it is made of (with `copy`,
    /// the one value it copies, counted again whole).
    fn account(&mut self, parts: &[Cost], copy: bool) -> Result<Cost, E> {
        let cost = if copy {
            parts.first().copied().unwrap_or(LEAF)
        } else {
            Cost {
                depth: 1 + parts.iter().map(|c| c.depth).max().unwrap_or(0),
                values: 1 + parts.iter().map(|c| c.values).sum::<u64>(),
            }
        };
        self.made = self.made.saturating_add(if copy { cost.values } else { 1 });
        if cost.depth > MAX_PICKLE_DEPTH {
            return Err(E::PickleTooDeep);
        }
        if self.made > MAX_PICKLE_VALUES {
            return Err(E::PickleTooManyValues);
        }
        Ok(cost)
    }

    /// The next `n` bytes.
    fn take(&mut self, n: usize) -> Result<&'a [u8], E> {
        let data = self.data;
        let s = data
            .get(self.pos..self.pos.saturating_add(n))
            .ok_or(E::PickleTruncated)?;
        self.pos += n;
        Ok(s)
    }

    /// The next byte.
    fn byte(&mut self) -> Result<u8, E> {
        Ok(self.take(1)?[0])
    }

    /// The next 4 bytes, a little-endian `u32`.
    fn u32_le(&mut self) -> Result<u32, E> {
        Ok(u32::from_le_bytes(array(self.take(4)?)))
    }

    /// Skips an opcode's argument of `n` bytes.
    fn skip(&mut self, n: usize) -> Result<Option<P>, E> {
        self.take(n)?;
        Ok(None)
    }

    /// The text up to the next newline (which is consumed).
    fn line(&mut self) -> Result<String, E> {
        let rest = self.data.get(self.pos..).ok_or(E::PickleTruncated)?;
        let end = rest
            .iter()
            .position(|b| *b == b'\n')
            .ok_or(E::PickleTruncated)?;
        self.pos += end + 1;
        Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
    }

    /// The items above the topmost mark, which is removed.
    fn pop_mark(&mut self) -> Result<Vec<(P, Cost)>, E> {
        let pos = self
            .stack
            .iter()
            .rposition(|(p, _)| matches!(p, P::Mark))
            .ok_or(E::PickleNoMark)?;
        let items = self.stack.split_off(pos + 1);
        self.stack.pop();
        Ok(items)
    }

    /// GLOBAL (module and name on two lines) and STACK_GLOBAL (both from the stack).
    fn global(&mut self, op: u8) -> Result<P, E> {
        if op == b'c' {
            let module = self.line()?;
            let name = self.line()?;
            return Ok(P::Global(module, name));
        }
        let name = self.stack.pop().ok_or(E::PickleEmptyStack(op))?.0;
        let module = self.stack.pop().ok_or(E::PickleEmptyStack(op))?.0;
        match (module, name) {
            (P::Str(m), P::Str(n)) => Ok(P::Global(m, n)),
            _ => Err(E::PickleStackGlobal),
        }
    }

    /// BINUNICODE (4-byte length) and SHORT_BINUNICODE (1-byte length).
    fn string(&mut self, op: u8) -> Result<P, E> {
        let n = if op == b'X' {
            self.u32_le()? as usize
        } else {
            self.byte()? as usize
        };
        let s = self.take(n)?;
        Ok(P::Str(String::from_utf8_lossy(s).into_owned()))
    }

    /// BININT, BININT1, BININT2, LONG1 (little-endian two's complement of 1 to 8 bytes read)
    /// and BINFLOAT (big-endian).
    fn number(&mut self, op: u8) -> Result<P, E> {
        Ok(match op {
            b'J' => P::Int(i32::from_le_bytes(array(self.take(4)?)) as i64),
            b'K' => P::Int(self.byte()? as i64),
            b'M' => P::Int(u16::from_le_bytes(array(self.take(2)?)) as i64),
            b'G' => P::Float(f64::from_be_bytes(array(self.take(8)?))),
            _ => {
                let n = self.byte()? as usize;
                let b = self.take(n)?;
                let mut v: i64 = 0;
                for (k, byte) in b.iter().enumerate().take(8) {
                    v |= (*byte as i64) << (8 * k);
                }
                if n > 0 && n < 8 && b[n - 1] & 0x80 != 0 {
                    v -= 1i64 << (8 * n);
                }
                P::Int(v)
            }
        })
    }

    /// BINPUT, LONG_BINPUT, MEMOIZE: the top of the stack copied into the memo.
    fn memo_put(&mut self, op: u8) -> Result<Option<P>, E> {
        let k = match op {
            b'q' => self.byte()? as u32,
            b'r' => self.u32_le()?,
            _ => self.memo.len() as u32,
        };
        let top_cost = self.stack.last().ok_or(E::PickleEmptyStack(op))?.1;
        let cost = self.account(&[top_cost], true)?;
        if let Some((top, _)) = self.stack.last() {
            let copy = top.clone();
            self.memo.insert(k, (copy, cost));
        }
        Ok(None)
    }

    /// BINGET, LONG_BINGET: a memo entry copied onto the stack.
    fn memo_get(&mut self, op: u8) -> Result<Option<P>, E> {
        let k = if op == b'h' {
            self.byte()? as u32
        } else {
            self.u32_le()?
        };
        let (_, memo_cost) = self.memo.get(&k).ok_or(E::PickleMemo(k))?;
        let cost = self.account(&[*memo_cost], true)?;
        if let Some((p, _)) = self.memo.get(&k) {
            let copy = p.clone();
            self.stack.push((copy, cost));
        }
        Ok(None)
    }

    /// TUPLE (the items above the mark) and TUPLE1 to TUPLE3 (the top one to three items).
    fn tuple(&mut self, op: u8) -> Result<Option<P>, E> {
        let items = if op == b't' {
            self.pop_mark()?
        } else {
            let n = (op - 0x84) as usize;
            if self.stack.len() < n {
                return Err(E::PickleEmptyStack(op));
            }
            self.stack.split_off(self.stack.len() - n)
        };
        let cost = self.account(&costs(&items), false)?;
        self.stack.push((P::Tuple(values(items)), cost));
        Ok(None)
    }

    /// SETITEM (one key and value) and SETITEMS (those above the mark): dicts are not kept.
    fn set_items(&mut self, op: u8) -> Result<Option<P>, E> {
        if op == b's' {
            self.stack.pop();
            self.stack.pop();
        } else {
            self.pop_mark()?;
        }
        Ok(None)
    }

    /// APPEND (one item) and APPENDS (those above the mark), onto the list below them.
    fn append(&mut self, op: u8) -> Result<Option<P>, E> {
        let items = if op == b'a' {
            vec![self.stack.pop().ok_or(E::PickleEmptyStack(op))?]
        } else {
            self.pop_mark()?
        };
        let Some((P::List(_), list_cost)) = self.stack.last() else {
            return Ok(None);
        };
        let mut parts = costs(&items);
        parts.push(Cost {
            depth: list_cost.depth - 1,
            values: list_cost.values - 1,
        });
        let cost = self.account(&parts, false)?;
        if let Some((P::List(l), list_cost)) = self.stack.last_mut() {
            *list_cost = cost;
            l.extend(values(items));
        }
        Ok(None)
    }

    /// BINPERSID: the tuple on the stack names a persistent object (a storage).
    fn persistent_id(&mut self) -> Result<Option<P>, E> {
        match self.stack.pop() {
            Some((P::Tuple(t), cost)) => {
                let cost = self.account(&[cost], false)?;
                self.stack.push((P::Persistent(t), cost));
                Ok(None)
            }
            _ => Err(E::PicklePersistentId),
        }
    }

    /// REDUCE and NEWOBJ: a call of the callable below with the arguments on top (kept, never
    /// run).
    fn call(&mut self, op: u8) -> Result<Option<P>, E> {
        let (args, args_cost) = self.stack.pop().ok_or(E::PickleEmptyStack(op))?;
        let (f, f_cost) = self.stack.pop().ok_or(E::PickleEmptyStack(op))?;
        let args = match args {
            P::Tuple(t) => t,
            other => vec![other],
        };
        let cost = self.account(&[args_cost, f_cost], false)?;
        self.stack.push((P::Call(Box::new(f), args), cost));
        Ok(None)
    }
}

fn storage_dtype(name: &str) -> Option<&'static str> {
    Some(match name {
        "FloatStorage" => "float32",
        "DoubleStorage" => "float64",
        "HalfStorage" => "float16",
        "BFloat16Storage" => "bfloat16",
        "LongStorage" => "int64",
        "IntStorage" => "int32",
        "ShortStorage" => "int16",
        "CharStorage" => "int8",
        "ByteStorage" => "uint8",
        "BoolStorage" => "bool",
        _ => return None,
    })
}

/// The number of elements of `shape`, or an error if it does not fit a `usize`.
fn element_count(shape: &[usize]) -> Result<usize, E> {
    if shape.contains(&0) {
        return Ok(0);
    }
    shape
        .iter()
        .try_fold(1usize, |n, d| n.checked_mul(*d))
        .ok_or_else(|| E::TooManyElements(shape.to_vec()))
}

/// The storage elements a strided view reaches: one past the highest offset that `shape` and
/// `strides` address from `offset` (0 for a view with no elements), or an error on overflow.
fn storage_reach(offset: usize, shape: &[usize], strides: &[usize]) -> Result<usize, E> {
    if shape.contains(&0) {
        return Ok(0);
    }
    let overflow = || view_overflow(shape, strides);
    shape
        .iter()
        .zip(strides)
        .try_fold(offset, |top, (d, s)| {
            top.checked_add((d - 1).checked_mul(*s)?)
        })
        .and_then(|top| top.checked_add(1))
        .ok_or_else(overflow)
}

fn view_overflow(shape: &[usize], strides: &[usize]) -> E {
    E::ViewOverflow {
        shape: shape.to_vec(),
        strides: strides.to_vec(),
    }
}

fn ints(p: &P) -> Result<Vec<usize>, E> {
    match p {
        P::Tuple(t) | P::List(t) => t
            .iter()
            .map(|x| match x {
                P::Int(v) => usize::try_from(*v).map_err(|_| E::SizeEntries),
                _ => Err(E::SizeEntries),
            })
            .collect(),
        _ => Err(E::SizeEntries),
    }
}

fn read_pt(bytes: &[u8]) -> Result<Tensor, E> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(E::NotZip)?;
    let pkl_name = zip
        .file_names()
        .filter_map(Result::ok)
        .find(|n| n.ends_with("data.pkl"))
        .map(|n| n.into_owned())
        .ok_or(E::NoPickle)?;
    let prefix = pkl_name.trim_end_matches("data.pkl").to_string();
    let mut pkl = Vec::new();
    let member = |name: &str, source: std::io::Error| E::Member {
        name: name.to_string(),
        source,
    };
    zip.by_name(&pkl_name)
        .map_err(|e| member(&pkl_name, e.into()))?
        .read_to_end(&mut pkl)
        .map_err(|e| member(&pkl_name, e))?;
    let args = rebuild_tensor_args(run_pickle(&pkl)?)?;
    let (Some(P::Persistent(st)), Some(P::Int(offset)), Some(size), Some(stride)) =
        (args.first(), args.get(1), args.get(2), args.get(3))
    else {
        return Err(E::RebuildArguments);
    };
    let (Some(P::Global(_, storage)), Some(P::Str(key))) = (st.get(1), st.get(2)) else {
        return Err(E::StorageReference);
    };
    let dtype = storage_dtype(storage).ok_or_else(|| E::StorageType(storage.clone()))?;
    let shape = ints(size)?;
    let strides = ints(stride)?;
    if strides.len() != shape.len() {
        return Err(E::StrideLength { shape, strides });
    }
    let offset = usize::try_from(*offset).map_err(|_| E::NegativeOffset(*offset))?;
    // Every size is checked before anything is allocated: the bytes the view reaches must be in
    // the storage (stored uncompressed, so its length is bounded by the file's).
    let esize = elem_size(dtype);
    let n = element_count(&shape)?;
    let needed = storage_reach(offset, &shape, &strides)?
        .checked_mul(esize)
        .ok_or_else(|| view_overflow(&shape, &strides))?;
    let storage_name = format!("{prefix}data/{key}");
    let entry = zip
        .by_name(&storage_name)
        .map_err(|e| member(&storage_name, e.into()))?;
    let stored = usize::try_from(entry.size()).unwrap_or(usize::MAX);
    if needed > stored {
        return Err(E::StorageShort {
            key: key.clone(),
            stored,
            shape,
            strides,
            offset,
            needed,
        });
    }
    if n > MAX_EXPANDED_ELEMENTS && n > stored / esize {
        return Err(E::Expands {
            shape,
            stored: stored / esize,
            n,
        });
    }
    let mut raw = Vec::new();
    raw.try_reserve_exact(needed)
        .map_err(|source| E::Allocation { n: needed, source })?;
    entry
        .take(needed as u64)
        .read_to_end(&mut raw)
        .map_err(|e| member(&storage_name, e))?;
    let short = || E::StorageShort {
        key: key.clone(),
        stored: raw.len(),
        shape: shape.clone(),
        strides: strides.clone(),
        offset,
        needed,
    };
    let data = view_values(&raw, dtype, n, offset, &shape, &strides, short)?;
    Ok(Tensor { shape, data, dtype })
}

/// The arguments of the `_rebuild_tensor_v2(storage, offset, size, stride, …)` call that a
/// `.pt` pickle makes, inside any `_rebuild_parameter(tensor, …)` calls.
fn rebuild_tensor_args(mut obj: P) -> Result<Vec<P>, E> {
    loop {
        let P::Call(f, args) = obj else {
            return Err(E::NotATensor);
        };
        match *f {
            P::Global(_, ref name) if name == "_rebuild_tensor_v2" || name == "_rebuild_tensor" => {
                return Ok(args)
            }
            P::Global(_, ref name) if name == "_rebuild_parameter" => {
                obj = args.into_iter().next().ok_or(E::NotATensor)?;
            }
            _ => return Err(E::NotATensor),
        }
    }
}

/// The `n` values of the view (`offset`, `shape`, `strides`, in elements) of the storage
/// `raw`, in row-major order; `short()` is the error when the view reaches past `raw`.
fn view_values(
    raw: &[u8],
    dtype: &str,
    n: usize,
    offset: usize,
    shape: &[usize],
    strides: &[usize],
    short: impl Fn() -> E,
) -> Result<Vec<f64>, E> {
    let esize = elem_size(dtype);
    let mut data = Vec::new();
    data.try_reserve_exact(n)
        .map_err(|source| E::Allocation { n, source })?;
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        // Below `needed / esize` (checked by the caller), so neither sum nor product overflows.
        let pos = offset + idx.iter().zip(strides).map(|(i, s)| i * s).sum::<usize>();
        let b = raw.get(pos * esize..(pos + 1) * esize).ok_or_else(&short)?;
        data.push(decode(dtype, b));
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        let mut header =
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn reads_npy_float32_and_int64() {
        let mut data = Vec::new();
        for v in [1.5f32, -2.0, 0.25, 8.0] {
            data.extend_from_slice(&v.to_le_bytes());
        }
        let t = read_npy(&npy("<f4", "(2, 2)", &data)).unwrap();
        assert_eq!(t.shape, [2, 2]);
        assert_eq!(t.data, [1.5, -2.0, 0.25, 8.0]);
        let mut data = Vec::new();
        for v in [7i64, -3] {
            data.extend_from_slice(&v.to_le_bytes());
        }
        let t = read_npy(&npy("<i8", "(2,)", &data)).unwrap();
        assert_eq!(t.data, [7.0, -3.0]);
        assert!(read_npy(&npy("<f4", "(3,)", &[0; 4])).is_err());
        assert!(read_npy(b"garbage").is_err());
    }

    #[test]
    fn decodes_half_types() {
        assert_eq!(
            decode("float16", &half::f16::from_f32(0.5).to_le_bytes()),
            0.5
        );
        assert_eq!(
            decode("bfloat16", &half::bf16::from_f32(-3.0).to_le_bytes()),
            -3.0
        );
    }

    #[test]
    fn garbage_pt_is_an_error() {
        assert!(read_pt(b"not a zip").is_err());
    }

    /// A pickle int of any value (LONG1, eight bytes).
    fn long(v: i64) -> Vec<u8> {
        let mut out = vec![0x8a, 8];
        out.extend_from_slice(&v.to_le_bytes());
        out
    }

    /// A `.pt` archive as `torch.save` writes it: a float32 storage `storage` viewed from
    /// `offset` with `size` and `stride`.
    fn pt(storage: &[f32], offset: i64, size: &[i64], stride: &[i64]) -> Vec<u8> {
        let tuple = |values: &[i64]| {
            let mut out = vec![b'('];
            for v in values {
                out.extend(long(*v));
            }
            out.push(b't');
            out
        };
        let text = |s: &str| {
            let mut out = vec![b'X'];
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
            out
        };
        let mut pkl = b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((".to_vec();
        pkl.extend(text("storage"));
        pkl.extend_from_slice(b"ctorch\nFloatStorage\n");
        pkl.extend(text("0"));
        pkl.extend(text("cpu"));
        pkl.extend(long(storage.len() as i64));
        pkl.extend_from_slice(b"tQ");
        pkl.extend(long(offset));
        pkl.extend(tuple(size));
        pkl.extend(tuple(stride));
        pkl.extend_from_slice(b"\x89tR.");
        let raw: Vec<u8> = storage.iter().flat_map(|v| v.to_le_bytes()).collect();
        archive(&pkl, &raw)
    }

    /// A `.pt` archive holding `pkl` as `data.pkl` and `raw` as storage `0`.
    fn archive(pkl: &[u8], raw: &[u8]) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let stored = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for (name, bytes) in [("t/data.pkl", pkl), ("t/data/0", raw)] {
            zip.start_file(name, stored).unwrap();
            std::io::Write::write_all(&mut zip, bytes).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    #[test]
    fn reads_strided_and_stride_0_pt_views() {
        let t = read_pt(&pt(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 0, &[2, 3], &[3, 1])).unwrap();
        assert_eq!(t.data, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        // Transposed, from an offset.
        let t = read_pt(&pt(&[9.0, 1.0, 2.0, 3.0, 4.0], 1, &[2, 2], &[1, 2])).unwrap();
        assert_eq!(t.data, [1.0, 3.0, 2.0, 4.0]);
        // An expanded view: many elements of one stored value are legal.
        let t = read_pt(&pt(&[7.0], 0, &[1000, 1000], &[0, 0])).unwrap();
        assert_eq!(t.data.len(), 1_000_000);
        assert!(t.data.iter().all(|v| *v == 7.0));
        let t = read_pt(&pt(&[], 0, &[0, 5], &[5, 1])).unwrap();
        assert!(t.data.is_empty());
    }

    /// Regression: oversized sizes, strides and offsets panicked or aborted
    /// on allocation; each is now an error before anything is allocated.
    #[test]
    fn oversized_or_overflowing_pt_views_are_errors() {
        let four = [1.0f32, 2.0, 3.0, 4.0];
        let cases: [(&str, i64, &[i64], &[i64]); 8] = [
            ("more elements than memory", 0, &[1 << 40, 1 << 40], &[1, 1]),
            ("shape overflows usize", 0, &[i64::MAX, 4], &[0, 0]),
            ("reach overflows", 0, &[2, 2], &[i64::MAX, 1]),
            ("reach beyond the storage", 0, &[2, 3], &[3, 1]),
            ("offset beyond the storage", 4, &[1], &[1]),
            ("negative offset", -1, &[1], &[1]),
            ("stride-0 bomb", 0, &[1 << 20, 1 << 20], &[0, 0]),
            ("lengths differ", 0, &[2, 2], &[1]),
        ];
        for (what, offset, size, stride) in cases {
            let result = std::panic::catch_unwind(|| read_pt(&pt(&four, offset, size, stride)));
            match result {
                Ok(Err(e)) => assert!(!e.to_string().is_empty(), "{what}"),
                Ok(Ok(t)) => panic!("{what}: read as {} elements", t.data.len()),
                Err(_) => panic!("{what}: panicked"),
            }
        }
    }

    /// A pickle nested 200,000 deep overflowed the stack when its value was dropped; one that
    /// copies a value into itself from the memo doubled it each round, without bound.
    #[test]
    fn pickle_bombs_are_errors() {
        let mut deep = b"\x80\x02K\x00".to_vec();
        deep.extend(std::iter::repeat_n(0x85u8, 200_000));
        deep.push(b'.');
        let err = read_pt(&archive(&deep, &[])).expect_err("too deep");
        assert!(matches!(err, E::PickleTooDeep), "{err}");
        let mut doubling = b"\x80\x02K\x00".to_vec();
        for _ in 0..200 {
            doubling.extend_from_slice(b"q\x00h\x00\x86");
        }
        doubling.push(b'.');
        let err = read_pt(&archive(&doubling, &[])).expect_err("too many");
        assert!(matches!(err, E::PickleTooManyValues), "{err}");
    }

    /// Regression: a `.npy` whose element count overflows was read as an
    /// empty tensor (and graded "pass").
    #[test]
    fn npy_element_count_overflow_is_an_error() {
        let shape = format!("({}, {}, 0)", 1u64 << 32, 1u64 << 32);
        assert!(read_npy(&npy("<f4", &shape, &[])).unwrap().data.is_empty());
        let shape = format!("({}, {})", 1u64 << 32, 1u64 << 32);
        let path = Path::new("dump_tensor_data/Functional.linear.0.forward.input.0.npy");
        let err = Tensor::parse(path, &npy("<f4", &shape, &[0; 16])).expect_err("overflow");
        let text = err.to_string();
        assert!(
            text.contains(&path.display().to_string()),
            "names the file: {text}"
        );
        assert!(text.contains("more elements"), "{text}");
        let shape = format!("({},)", usize::MAX / 2);
        assert!(read_npy(&npy("<f4", &shape, &[0; 16])).is_err());
    }
}
