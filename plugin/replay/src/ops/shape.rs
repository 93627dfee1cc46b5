//! Shape ops: `cat`/`stack`, `split`/`chunk`, `view`/`reshape`/`flatten`, `transpose`/`t`/
//! `permute`, `expand`, `squeeze`/`unsqueeze`, `contiguous`/`clone`. All exact.

use ndarray::{ArrayD, Axis, IxDyn};

use super::common::norm_dim;
use crate::args::{CallArgs, Value};
use crate::error::{ReplayError, Result};
use crate::reference::Reference;

fn shape_err(e: ndarray::ShapeError) -> ReplayError {
    ReplayError::args(e.to_string())
}

fn loaded_list(args: &CallArgs) -> Result<Vec<ArrayD<f64>>> {
    let v = args
        .get(0, "tensors")
        .ok_or_else(|| ReplayError::args("no tensors"))?;
    let ts = v.tensors();
    if ts.is_empty() {
        return Err(ReplayError::args("no tensors"));
    }
    ts.iter()
        .map(|t| {
            t.data
                .clone()
                .ok_or_else(|| ReplayError::args("a tensor of the list is not loaded"))
        })
        .collect()
}

fn dim_at(args: &CallArgs, position: usize, default: i64) -> Result<i64> {
    Ok(args
        .ints(position, "dim")?
        .and_then(|d| d.first().copied())
        .unwrap_or(default))
}

/// `cat(tensors, dim=0)` (empty 1-D tensors are skipped, as torch does).
pub fn cat(args: &CallArgs) -> Result<Vec<Reference>> {
    let ts = loaded_list(args)?;
    let ts: Vec<ArrayD<f64>> = ts
        .into_iter()
        .filter(|t| !(t.ndim() == 1 && t.is_empty()))
        .collect();
    let first = ts
        .first()
        .ok_or_else(|| ReplayError::args("nothing to cat"))?;
    let dim = norm_dim(dim_at(args, 1, 0)?, first.ndim())?;
    let views: Vec<_> = ts.iter().map(|t| t.view()).collect();
    Ok(vec![Reference::exact(
        ndarray::concatenate(Axis(dim), &views).map_err(shape_err)?,
    )])
}

/// `stack(tensors, dim=0)`.
pub fn stack(args: &CallArgs) -> Result<Vec<Reference>> {
    let ts = loaded_list(args)?;
    let nd = ts[0].ndim() + 1;
    let dim = norm_dim(dim_at(args, 1, 0)?, nd)?;
    let views: Vec<_> = ts.iter().map(|t| t.view()).collect();
    Ok(vec![Reference::exact(
        ndarray::stack(Axis(dim), &views).map_err(shape_err)?,
    )])
}

/// `split(tensor, split_size_or_sections, dim=0)` and `chunk(input, chunks, dim=0)`.
pub fn split(args: &CallArgs, is_chunk: bool) -> Result<Vec<Reference>> {
    let x = args
        .tensor(0, "tensor")
        .or_else(|_| args.tensor(0, "input"))?;
    let dim = norm_dim(dim_at(args, 2, 0)?, x.ndim())?;
    let n = x.shape()[dim];
    let sizes: Vec<usize> = match args.get(
        1,
        if is_chunk {
            "chunks"
        } else {
            "split_size_or_sections"
        },
    ) {
        Some(Value::Int(k)) if *k > 0 => {
            let k = *k as usize;
            let step = if is_chunk { n.div_ceil(k) } else { k };
            let step = step.max(1);
            (0..n.div_ceil(step))
                .map(|i| step.min(n - i * step))
                .collect()
        }
        Some(v) => v
            .as_ints()
            .ok_or_else(|| ReplayError::args("split sections are not ints"))?
            .into_iter()
            .map(|s| s.max(0) as usize)
            .collect(),
        None => return Err(ReplayError::args("split without sizes")),
    };
    let mut start = 0;
    let mut out = Vec::new();
    for s in sizes {
        let end = (start + s).min(n);
        out.push(Reference::exact(
            x.slice_axis(Axis(dim), (start..end).into()).to_owned(),
        ));
        start = end;
    }
    Ok(out)
}

/// The target shape of `view`/`reshape`/`expand`: a list argument or the ints after the tensor.
fn shape_args(args: &CallArgs) -> Result<Vec<i64>> {
    match args
        .args
        .get(1)
        .or_else(|| args.kwarg("shape"))
        .or_else(|| args.kwarg("size"))
    {
        Some(Value::List(_)) => args
            .get(1, "shape")
            .or_else(|| args.kwarg("size"))
            .and_then(Value::as_ints)
            .ok_or_else(|| ReplayError::args("shape is not a list of ints")),
        Some(_) => args.args[1..]
            .iter()
            .map(|v| {
                v.as_i64()
                    .ok_or_else(|| ReplayError::args("shape is not ints"))
            })
            .collect(),
        None => Err(ReplayError::args("no shape")),
    }
}

/// `view(*shape)`, `reshape(shape)` (one `-1` inferred).
pub fn reshape(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    if let Some(Value::Other(t)) = args.args.get(1) {
        return Err(ReplayError::args(format!("view as another dtype ({t})")));
    }
    let dims = shape_args(args)?;
    let known: i64 = dims.iter().filter(|&&d| d >= 0).product();
    let shape: Vec<usize> = dims
        .iter()
        .map(|&d| {
            if d < 0 {
                if known == 0 {
                    0
                } else {
                    x.len() / known as usize
                }
            } else {
                d as usize
            }
        })
        .collect();
    let flat: Vec<f64> = x.iter().copied().collect();
    Ok(vec![Reference::exact(
        ArrayD::from_shape_vec(IxDyn(&shape), flat).map_err(shape_err)?,
    )])
}

/// `flatten(input, start_dim=0, end_dim=-1)`.
pub fn flatten(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    if x.ndim() == 0 {
        return Ok(vec![Reference::exact(
            x.clone()
                .into_shape_with_order(IxDyn(&[1]))
                .map_err(shape_err)?,
        )]);
    }
    let s = norm_dim(
        args.ints(1, "start_dim")?
            .and_then(|d| d.first().copied())
            .unwrap_or(0),
        x.ndim(),
    )?;
    let e = norm_dim(
        args.ints(2, "end_dim")?
            .and_then(|d| d.first().copied())
            .unwrap_or(-1),
        x.ndim(),
    )?;
    let mut shape: Vec<usize> = x.shape()[..s].to_vec();
    shape.push(x.shape()[s..=e.max(s)].iter().product());
    shape.extend(&x.shape()[e.max(s) + 1..]);
    let flat: Vec<f64> = x.iter().copied().collect();
    Ok(vec![Reference::exact(
        ArrayD::from_shape_vec(IxDyn(&shape), flat).map_err(shape_err)?,
    )])
}

/// `transpose(input, dim0, dim1)`, `t(input)`.
pub fn transpose(args: &CallArgs, is_t: bool) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    if x.ndim() < 2 {
        return Ok(vec![Reference::exact(x.clone())]);
    }
    let (a, b) = if is_t {
        (0, 1)
    } else {
        let a = args
            .ints(1, "dim0")?
            .and_then(|d| d.first().copied())
            .ok_or_else(|| ReplayError::args("transpose without dim0"))?;
        let b = args
            .ints(2, "dim1")?
            .and_then(|d| d.first().copied())
            .ok_or_else(|| ReplayError::args("transpose without dim1"))?;
        (norm_dim(a, x.ndim())?, norm_dim(b, x.ndim())?)
    };
    let mut y = x.clone();
    y.swap_axes(a, b);
    Ok(vec![Reference::exact(y.as_standard_layout().into_owned())])
}

/// `permute(input, dims)`.
pub fn permute(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let dims = shape_args(args)?;
    if dims.len() != x.ndim() {
        return Err(ReplayError::args("permute dims do not match the tensor"));
    }
    let order = dims
        .iter()
        .map(|&d| norm_dim(d, x.ndim()))
        .collect::<Result<Vec<_>>>()?;
    let mut seen = order.clone();
    seen.sort_unstable();
    seen.dedup();
    if seen.len() != order.len() {
        return Err(ReplayError::args("permute dims repeat"));
    }
    Ok(vec![Reference::exact(
        x.clone()
            .permuted_axes(IxDyn(&order))
            .as_standard_layout()
            .into_owned(),
    )])
}

/// `expand(*sizes)` (`-1` keeps a dim).
pub fn expand(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let sizes = shape_args(args)?;
    let lead = sizes
        .len()
        .checked_sub(x.ndim())
        .ok_or_else(|| ReplayError::args("expand to fewer dims"))?;
    let shape: Vec<usize> = sizes
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            if s < 0 && i >= lead {
                x.shape()[i - lead]
            } else {
                s.max(0) as usize
            }
        })
        .collect();
    let y = x
        .broadcast(IxDyn(&shape))
        .ok_or_else(|| ReplayError::args(format!("cannot expand {:?} to {shape:?}", x.shape())))?
        .to_owned();
    Ok(vec![Reference::exact(y)])
}

/// `squeeze(input, dim=None)`, `unsqueeze(input, dim)`.
pub fn squeeze(args: &CallArgs, un: bool) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let dims = args.ints(1, "dim")?;
    let shape: Vec<usize> = if un {
        let d = dims
            .and_then(|d| d.first().copied())
            .ok_or_else(|| ReplayError::args("unsqueeze without dim"))?;
        let d = norm_dim(d, x.ndim() + 1)?;
        let mut s = x.shape().to_vec();
        s.insert(d, 1);
        s
    } else {
        let drop: Vec<usize> = match dims {
            None => (0..x.ndim()).collect(),
            Some(d) => d
                .iter()
                .map(|&d| norm_dim(d, x.ndim()))
                .collect::<Result<_>>()?,
        };
        x.shape()
            .iter()
            .enumerate()
            .filter(|(i, &n)| !(n == 1 && drop.contains(i)))
            .map(|(_, &n)| n)
            .collect()
    };
    let flat: Vec<f64> = x.iter().copied().collect();
    Ok(vec![Reference::exact(
        ArrayD::from_shape_vec(IxDyn(&shape), flat).map_err(shape_err)?,
    )])
}

/// `contiguous`, `clone`, `detach`: the input itself.
pub fn identity(args: &CallArgs) -> Result<Vec<Reference>> {
    Ok(vec![Reference::exact(args.tensor(0, "input")?.clone())])
}
