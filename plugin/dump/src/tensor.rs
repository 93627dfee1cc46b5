//! Real tensors of `task: tensor` dumps: `.npy` (MindSpore) and PyTorch `.pt` files.
//!
//! A `.pt` file is a zip archive holding `data.pkl` (a pickle that calls
//! `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, …)`) and one raw little-endian
//! file per storage. The pickle is read by a small pickle machine that knows only the opcodes
//! `torch.save` emits; nothing is executed. Values are widened to `f64` for the metrics, as
//! msprobe does (`bfloat16` → float first).

use std::io::Read;
use std::path::Path;

use crate::DumpError;

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
    pub fn read(path: &Path) -> Result<Tensor, DumpError> {
        let bytes = std::fs::read(path).map_err(|source| DumpError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        match path.extension().and_then(|e| e.to_str()) {
            Some("npy") => read_npy(&bytes).map_err(|m| DumpError::tensor(path, m)),
            _ => read_pt(&bytes).map_err(|m| DumpError::tensor(path, m)),
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

fn read_npy(bytes: &[u8]) -> Result<Tensor, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not a .npy file (bad magic)".into());
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!("unsupported .npy version {v}")),
    };
    let header = bytes
        .get(start..start + header_len)
        .ok_or("truncated .npy header")?;
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
    let descr = field("descr").ok_or("no descr in .npy header")?;
    if field("fortran_order").as_deref() == Some("True") {
        return Err("Fortran-ordered .npy arrays are not supported".into());
    }
    let shape: Vec<usize> = field("shape")
        .ok_or("no shape in .npy header")?
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| format!("bad shape entry {s:?}"))
        })
        .collect::<Result<_, _>>()?;
    if descr.starts_with('>') {
        return Err(format!("big-endian .npy ({descr}) is not supported"));
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
        other => return Err(format!("unsupported .npy dtype {other}")),
    };
    let n: usize = shape.iter().product();
    let size = elem_size(dtype);
    let data = &bytes[start + header_len..];
    if data.len() < n * size {
        return Err(format!(
            "truncated .npy data: {} bytes for {n} elements of {dtype}",
            data.len()
        ));
    }
    let values = data[..n * size]
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

fn run_pickle(data: &[u8]) -> Result<P, String> {
    let mut stack: Vec<P> = Vec::new();
    let mut memo: std::collections::HashMap<u32, P> = std::collections::HashMap::new();
    let mut i = 0usize;
    let take = |i: &mut usize, n: usize| -> Result<&[u8], String> {
        let s = data.get(*i..*i + n).ok_or("truncated pickle")?;
        *i += n;
        Ok(s)
    };
    let line = |i: &mut usize| -> Result<String, String> {
        let rest = data.get(*i..).ok_or("truncated pickle")?;
        let end = rest
            .iter()
            .position(|b| *b == b'\n')
            .ok_or("truncated pickle")?;
        *i += end + 1;
        Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
    };
    let pop_mark = |stack: &mut Vec<P>| -> Result<Vec<P>, String> {
        let pos = stack
            .iter()
            .rposition(|p| matches!(p, P::Mark))
            .ok_or("pickle MARK missing")?;
        let items = stack.split_off(pos + 1);
        stack.pop();
        Ok(items)
    };
    loop {
        let op = *data.get(i).ok_or("pickle ends without STOP")?;
        i += 1;
        match op {
            0x80 => {
                take(&mut i, 1)?;
            }
            0x95 => {
                take(&mut i, 8)?;
            }
            b'c' => {
                let module = line(&mut i)?;
                let name = line(&mut i)?;
                stack.push(P::Global(module, name));
            }
            0x93 => {
                let name = stack.pop().ok_or("empty stack")?;
                let module = stack.pop().ok_or("empty stack")?;
                match (module, name) {
                    (P::Str(m), P::Str(n)) => stack.push(P::Global(m, n)),
                    _ => return Err("STACK_GLOBAL needs two strings".into()),
                }
            }
            b'X' => {
                let n = u32::from_le_bytes(take(&mut i, 4)?.try_into().map_err(|_| "bad len")?);
                let s = take(&mut i, n as usize)?;
                stack.push(P::Str(String::from_utf8_lossy(s).into_owned()));
            }
            0x8c => {
                let n = take(&mut i, 1)?[0] as usize;
                let s = take(&mut i, n)?;
                stack.push(P::Str(String::from_utf8_lossy(s).into_owned()));
            }
            b'q' => {
                let k = take(&mut i, 1)?[0] as u32;
                memo.insert(k, stack.last().cloned().ok_or("empty stack")?);
            }
            b'r' => {
                let k = u32::from_le_bytes(take(&mut i, 4)?.try_into().map_err(|_| "bad")?);
                memo.insert(k, stack.last().cloned().ok_or("empty stack")?);
            }
            0x94 => {
                let k = memo.len() as u32;
                memo.insert(k, stack.last().cloned().ok_or("empty stack")?);
            }
            b'h' => {
                let k = take(&mut i, 1)?[0] as u32;
                stack.push(memo.get(&k).cloned().ok_or("bad memo reference")?);
            }
            b'j' => {
                let k = u32::from_le_bytes(take(&mut i, 4)?.try_into().map_err(|_| "bad")?);
                stack.push(memo.get(&k).cloned().ok_or("bad memo reference")?);
            }
            b'(' => stack.push(P::Mark),
            b't' => {
                let items = pop_mark(&mut stack)?;
                stack.push(P::Tuple(items));
            }
            b')' => stack.push(P::Tuple(Vec::new())),
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                if stack.len() < n {
                    return Err("empty stack".into());
                }
                let items = stack.split_off(stack.len() - n);
                stack.push(P::Tuple(items));
            }
            b'Q' => match stack.pop() {
                Some(P::Tuple(t)) => stack.push(P::Persistent(t)),
                _ => return Err("BINPERSID needs a tuple".into()),
            },
            b'J' => {
                let v = i32::from_le_bytes(take(&mut i, 4)?.try_into().map_err(|_| "bad")?);
                stack.push(P::Int(v as i64));
            }
            b'K' => {
                let v = take(&mut i, 1)?[0];
                stack.push(P::Int(v as i64));
            }
            b'M' => {
                let v = u16::from_le_bytes(take(&mut i, 2)?.try_into().map_err(|_| "bad")?);
                stack.push(P::Int(v as i64));
            }
            0x8a => {
                let n = take(&mut i, 1)?[0] as usize;
                let b = take(&mut i, n)?;
                let mut v: i64 = 0;
                for (k, byte) in b.iter().enumerate().take(8) {
                    v |= (*byte as i64) << (8 * k);
                }
                if n > 0 && n < 8 && b[n - 1] & 0x80 != 0 {
                    v -= 1i64 << (8 * n);
                }
                stack.push(P::Int(v));
            }
            b'G' => {
                let v = f64::from_be_bytes(take(&mut i, 8)?.try_into().map_err(|_| "bad")?);
                stack.push(P::Float(v));
            }
            0x88 => stack.push(P::Bool(true)),
            0x89 => stack.push(P::Bool(false)),
            b'N' => stack.push(P::None),
            b'}' => stack.push(P::Dict),
            b']' => stack.push(P::List(Vec::new())),
            b's' => {
                stack.pop();
                stack.pop();
            }
            b'u' => {
                pop_mark(&mut stack)?;
            }
            b'a' => {
                let v = stack.pop().ok_or("empty stack")?;
                if let Some(P::List(l)) = stack.last_mut() {
                    l.push(v);
                }
            }
            b'e' => {
                let items = pop_mark(&mut stack)?;
                if let Some(P::List(l)) = stack.last_mut() {
                    l.extend(items);
                }
            }
            b'R' | 0x81 => {
                let args = stack.pop().ok_or("empty stack")?;
                let f = stack.pop().ok_or("empty stack")?;
                let args = match args {
                    P::Tuple(t) => t,
                    other => vec![other],
                };
                stack.push(P::Call(Box::new(f), args));
            }
            b'b' => {
                stack.pop();
            }
            b'.' => return stack.pop().ok_or_else(|| "empty pickle".to_string()),
            other => return Err(format!("unsupported pickle opcode 0x{other:02x}")),
        }
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

fn ints(p: &P) -> Result<Vec<usize>, String> {
    match p {
        P::Tuple(t) | P::List(t) => t
            .iter()
            .map(|x| match x {
                P::Int(v) if *v >= 0 => Ok(*v as usize),
                _ => Err("bad size/stride".to_string()),
            })
            .collect(),
        _ => Err("size/stride must be a tuple".into()),
    }
}

fn read_pt(bytes: &[u8]) -> Result<Tensor, String> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| format!("not a torch zip archive: {e}"))?;
    let pkl_name = zip
        .file_names()
        .filter_map(Result::ok)
        .find(|n| n.ends_with("data.pkl"))
        .map(|n| n.into_owned())
        .ok_or("no data.pkl in the archive")?;
    let prefix = pkl_name.trim_end_matches("data.pkl").to_string();
    let mut pkl = Vec::new();
    zip.by_name(&pkl_name)
        .map_err(|e| e.to_string())?
        .read_to_end(&mut pkl)
        .map_err(|e| e.to_string())?;
    let mut obj = run_pickle(&pkl)?;
    // Unwrap `_rebuild_parameter(tensor, …)`.
    loop {
        match obj {
            P::Call(f, args) => match *f {
                P::Global(_, ref name)
                    if name == "_rebuild_tensor_v2" || name == "_rebuild_tensor" =>
                {
                    obj = P::Call(f, args);
                    break;
                }
                P::Global(_, ref name) if name == "_rebuild_parameter" => {
                    obj = args.into_iter().next().ok_or("empty _rebuild_parameter")?;
                }
                _ => return Err("the pickle does not hold a tensor".into()),
            },
            _ => return Err("the pickle does not hold a tensor".into()),
        }
    }
    let P::Call(_, args) = obj else {
        return Err("the pickle does not hold a tensor".into());
    };
    let (Some(P::Persistent(st)), Some(P::Int(offset)), Some(size), Some(stride)) =
        (args.first(), args.get(1), args.get(2), args.get(3))
    else {
        return Err("unexpected _rebuild_tensor_v2 arguments".into());
    };
    let (Some(P::Global(_, storage)), Some(P::Str(key))) = (st.get(1), st.get(2)) else {
        return Err("unexpected storage reference".into());
    };
    let dtype = storage_dtype(storage).ok_or_else(|| format!("unsupported storage {storage}"))?;
    let shape = ints(size)?;
    let strides = ints(stride)?;
    let mut raw = Vec::new();
    zip.by_name(&format!("{prefix}data/{key}"))
        .map_err(|e| format!("storage {key}: {e}"))?
        .read_to_end(&mut raw)
        .map_err(|e| e.to_string())?;
    let esize = elem_size(dtype);
    let n: usize = shape.iter().product();
    let mut data = Vec::with_capacity(n);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        let pos = *offset as usize + idx.iter().zip(&strides).map(|(i, s)| i * s).sum::<usize>();
        let b = raw
            .get(pos * esize..(pos + 1) * esize)
            .ok_or("storage too short for the tensor")?;
        data.push(decode(dtype, b));
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(Tensor { shape, data, dtype })
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
}
