//! Indexing: `embedding`, `index_select`, `gather`. All exact (a correct kernel copies).

use ndarray::{ArrayD, Axis, Dimension, IxDyn};

use super::common::norm_dim;
use crate::args::CallArgs;
use crate::error::{ReplayError, Result};
use crate::reference::Reference;

fn index(v: f64, len: usize, what: &str) -> Result<usize> {
    let i = v as i64;
    let i = if i < 0 { i + len as i64 } else { i };
    if v.fract() != 0.0 || i < 0 || i as usize >= len {
        return Err(ReplayError::args(format!(
            "{what} index {v} is out of range for size {len}"
        )));
    }
    Ok(i as usize)
}

/// `embedding(input, weight, padding_idx, max_norm, …)`: rows of `weight`.
pub fn embedding(args: &CallArgs) -> Result<Vec<Reference>> {
    let ids = args.tensor(0, "input")?;
    let w = args.tensor(1, "weight")?;
    if args.get(3, "max_norm").is_some() {
        return Err(ReplayError::args(
            "embedding with max_norm renormalizes the weight in place (not replayed)",
        ));
    }
    if w.ndim() != 2 {
        return Err(ReplayError::args("embedding weight is not 2-D"));
    }
    let (rows, dim) = (w.shape()[0], w.shape()[1]);
    let mut out = Vec::with_capacity(ids.len() * dim);
    for &id in ids.iter() {
        let r = index(id, rows, "embedding")?;
        out.extend(w.index_axis(Axis(0), r).iter());
    }
    let mut shape = ids.shape().to_vec();
    shape.push(dim);
    let exact =
        ArrayD::from_shape_vec(IxDyn(&shape), out).map_err(|e| ReplayError::args(e.to_string()))?;
    Ok(vec![Reference::exact(exact)])
}

/// `index_select(input, dim, index)`.
pub fn index_select(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let dim = args
        .ints(1, "dim")?
        .and_then(|d| d.first().copied())
        .ok_or_else(|| ReplayError::args("index_select without dim"))?;
    let dim = norm_dim(dim, x.ndim())?;
    let idx = args.tensor(2, "index")?;
    let picks = idx
        .iter()
        .map(|&v| index(v, x.shape()[dim], "index_select"))
        .collect::<Result<Vec<_>>>()?;
    Ok(vec![Reference::exact(x.select(Axis(dim), &picks))])
}

/// `gather(input, dim, index)`: `out[i][j][k] = input[index[i][j][k]][j][k]` (dim 0).
pub fn gather(args: &CallArgs) -> Result<Vec<Reference>> {
    let x = args.tensor(0, "input")?;
    let dim = args
        .ints(1, "dim")?
        .and_then(|d| d.first().copied())
        .ok_or_else(|| ReplayError::args("gather without dim"))?;
    let dim = norm_dim(dim, x.ndim())?;
    let idx = args.tensor(2, "index")?;
    if idx.ndim() != x.ndim() {
        return Err(ReplayError::args("gather index has another number of dims"));
    }
    let mut out = Vec::with_capacity(idx.len());
    for (pos, &v) in idx.indexed_iter() {
        let mut at: Vec<usize> = pos.slice().to_vec();
        at[dim] = index(v, x.shape()[dim], "gather")?;
        let value = x
            .get(IxDyn(&at))
            .copied()
            .ok_or_else(|| ReplayError::args("gather index outside the input"))?;
        out.push(value);
    }
    let exact =
        ArrayD::from_shape_vec(idx.raw_dim(), out).map_err(|e| ReplayError::args(e.to_string()))?;
    Ok(vec![Reference::exact(exact)])
}
