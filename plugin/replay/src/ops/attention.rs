//! Attention: torch's `scaled_dot_product_attention` and torch_npu's `npu_fusion_attention`.
//!
//! Both are `softmax(S)·V` with `S = scale·Q·Kᵀ` plus a mask (and, for the NPU op, `pse`),
//! computed in f64 row by row (one query position of one head at a time, so no `S1 × S2`
//! table is held). Grouped-query heads (fewer key/value heads) map query head `h` to key/value
//! head `h / (N1 / N2)`, as torch's `enable_gqa` (`repeat_interleave`) and msprobe's
//! `broadcast_kv` both do.
//!
//! Budget (a flash-attention kernel: fp32 scores, an online softmax, `P` rounded to the input
//! dtype before the `P·V` product, one division by the row sum), per output element
//! `O_id = Σ_j p_ij·v_jd`, one output rounding plus `u·scale` with
//!
//! ```text
//! scale = (S2 + 4)·Σ_j p_ij|v_jd|                       the P·V sum and the rescalings
//!       + (D + 8)·Σ_j p_ij|v_jd − O_id|·(1 + |s_ij − m_i| + A_ij)   an error in s_ij moves p_ij
//!       + (S2 + 8)·|O_id|                               the row sum and the division
//!       + ρ·Σ_j p_ij·(|v_jd| + |v_jd − O_id|)           P rounded to the input dtype
//! ```
//!
//! where `A_ij = |scale|·Σ_d |q_id·k_jd|` (+ `|scale·pse|`), `m_i` the row's maximum and
//! `ρ = u_in / u` (2¹⁶ for bf16, 2¹³ for fp16, 1 for fp32): the rounding of `P` dominates a
//! bf16 kernel's error, which is why its budget is wider than one rounding of the output.

use ndarray::{Array3, ArrayD, ArrayViewD, Axis, IxDyn};
use rayon::prelude::*;

use crate::args::{CallArgs, Value};
use crate::error::{ReplayError, Result};
use crate::reference::{Budget, Reference};

use super::context::Context;

/// The attention budget: one output rounding; the internal part is all in the scale.
const BUDGET: Budget = Budget {
    output_ulps: 1.0,
    internal: 1.0,
    family: "attention",
};

/// The additive mask value of msprobe's CPU reference for a masked position (after the
/// scale): `qk + atten_mask.bool() * (-40000.0)`.
const NPU_MASKED: f64 = -40000.0;

/// Keyword-only arguments (after `input_layout` in torch_npu's signature).
const KEYWORD_ONLY: usize = usize::MAX;

/// The query, key and value heads of one call: `[heads, seq, dim]` each, with
/// `q.heads = group · k.heads`.
struct Heads {
    q: Array3<f64>,
    k: Array3<f64>,
    v: Array3<f64>,
    group: usize,
}

/// How one row's raw dot products become scores: `(head, query position, dots, magnitudes)`,
/// both rewritten in place (`dots[j] = q·k_j`, `magnitudes[j] = Σ|q·k_j|` on entry).
type Scores<'a> = dyn Fn(usize, usize, &mut [f64], &mut [f64]) + Sync + 'a;

/// `softmax(scores)·V` for every head and query position: the exact output `[heads, S1, Dv]`
/// and its scale.
fn attend(heads: &Heads, rho: f64, scores: &Scores) -> Result<(Array3<f64>, Array3<f64>)> {
    let (h1, s1, d) = heads.q.dim();
    let (_, s2, _) = heads.k.dim();
    let dv = heads.v.dim().2;
    if heads.k.dim().0 * heads.group != h1 || heads.v.dim().0 != heads.k.dim().0 {
        return Err(ReplayError::args(format!(
            "{h1} query heads do not read {} key and {} value heads in groups of {}",
            heads.k.dim().0,
            heads.v.dim().0,
            heads.group
        )));
    }
    let (qs, ks, vs): (Vec<f64>, Vec<f64>, Vec<f64>) = (
        heads.q.iter().copied().collect(),
        heads.k.iter().copied().collect(),
        heads.v.iter().copied().collect(),
    );
    let mut out = vec![0.0; h1 * s1 * dv];
    let mut scale = vec![0.0; h1 * s1 * dv];
    if dv > 0 {
        out.par_chunks_mut(dv)
            .zip(scale.par_chunks_mut(dv))
            .enumerate()
            .for_each(|(row, (o, sc))| {
                let (h, i) = (row / s1.max(1), row % s1.max(1));
                let kv = h / heads.group.max(1);
                let q = &qs[(h * s1 + i) * d..][..d];
                let k = &ks[kv * s2 * d..][..s2 * d];
                let v = &vs[kv * s2 * dv..][..s2 * dv];
                let mut s = vec![0.0; s2];
                let mut a = vec![0.0; s2];
                for (j, kj) in k.chunks_exact(d.max(1)).enumerate().take(s2) {
                    let (mut dot, mut mag) = (0.0, 0.0);
                    for (x, y) in q.iter().zip(kj) {
                        let p = x * y;
                        dot += p;
                        mag += p.abs();
                    }
                    s[j] = dot;
                    a[j] = mag;
                }
                scores(h, i, &mut s, &mut a);
                let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if m == f64::NEG_INFINITY {
                    // Every position masked: torch's safe softmax gives zeros.
                    return;
                }
                let mut p: Vec<f64> = s.iter().map(|&x| (x - m).exp()).collect();
                let total: f64 = p.iter().sum();
                p.iter_mut().for_each(|x| *x /= total);
                for (&pj, vj) in p.iter().zip(v.chunks_exact(dv)) {
                    if pj != 0.0 {
                        for (oc, &x) in o.iter_mut().zip(vj) {
                            *oc += pj * x;
                        }
                    }
                }
                let (mut pv, mut spread, mut score_err) =
                    (vec![0.0; dv], vec![0.0; dv], vec![0.0; dv]);
                for (j, vj) in v.chunks_exact(dv).enumerate() {
                    let pj = p[j];
                    if pj == 0.0 {
                        continue;
                    }
                    let moved = pj * (1.0 + (s[j] - m).abs() + a[j]);
                    for c in 0..dv {
                        let off = (vj[c] - o[c]).abs();
                        pv[c] += pj * vj[c].abs();
                        spread[c] += pj * off;
                        score_err[c] += moved * off;
                    }
                }
                for c in 0..dv {
                    sc[c] = (s2 as f64 + 4.0) * pv[c]
                        + (d as f64 + 8.0) * score_err[c]
                        + (s2 as f64 + 8.0) * o[c].abs()
                        + rho * (pv[c] + spread[c]);
                }
            });
    }
    let shape = (h1, s1, dv);
    let back =
        |v: Vec<f64>| Array3::from_shape_vec(shape, v).unwrap_or_else(|_| Array3::zeros(shape));
    Ok((back(out), back(scale)))
}

fn to_heads(
    x: &ArrayD<f64>,
    heads: usize,
    seq: usize,
    dim: usize,
    what: &str,
) -> Result<Array3<f64>> {
    x.as_standard_layout()
        .into_owned()
        .into_shape_with_order((heads, seq, dim))
        .map_err(|_| {
            ReplayError::args(format!(
                "{what} of shape {:?} is not {heads} heads of {seq}×{dim}",
                x.shape()
            ))
        })
}

/// The index of the flat head `h` over the leading `dims`, most significant first.
fn unravel(mut h: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for (slot, &n) in idx.iter_mut().zip(dims).rev() {
        let n = n.max(1);
        *slot = h % n;
        h /= n;
    }
    idx
}

/// A mask tensor broadcast to the scores' full shape `[lead..., S1, S2]`.
fn broadcast_mask<'a>(
    mask: &'a ArrayD<f64>,
    full: &[usize],
    what: &str,
) -> Result<ArrayViewD<'a, f64>> {
    mask.broadcast(IxDyn(full)).ok_or_else(|| {
        ReplayError::args(format!(
            "{what} of shape {:?} does not broadcast to the scores' shape {full:?}",
            mask.shape()
        ))
    })
}

/// `scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
/// is_causal=False, scale=None, enable_gqa=False)` (`dropout_p > 0` is random: not replayed).
pub fn scaled_dot_product_attention(args: &CallArgs, ctx: Context) -> Result<Vec<Reference>> {
    let q = args.tensor(0, "query")?;
    let k = args.tensor(1, "key")?;
    let v = args.tensor(2, "value")?;
    let n = q.ndim();
    if n < 2 || k.ndim() != n || v.ndim() != n {
        return Err(ReplayError::args(format!(
            "query, key and value of shapes {:?}, {:?}, {:?} (the same number of dims, at least 2)",
            q.shape(),
            k.shape(),
            v.shape()
        )));
    }
    let (l, e) = (q.shape()[n - 2], q.shape()[n - 1]);
    let (s, ek) = (k.shape()[n - 2], k.shape()[n - 1]);
    let (sv, ev) = (v.shape()[n - 2], v.shape()[n - 1]);
    if ek != e || sv != s {
        return Err(ReplayError::args(format!(
            "key {:?} or value {:?} does not fit query {:?}",
            k.shape(),
            v.shape(),
            q.shape()
        )));
    }
    let gqa = args.bool_or(7, "enable_gqa", false)?;
    let lead = &q.shape()[..n - 2];
    let kv_lead = &k.shape()[..n - 2];
    let group = if gqa && n >= 3 && lead[..n - 3] == kv_lead[..n - 3] {
        let (hq, hk) = (lead[n - 3], kv_lead[n - 3]);
        if hk == 0 || hq % hk != 0 {
            return Err(ReplayError::args(format!(
                "enable_gqa with {hq} query heads and {hk} key/value heads (not a multiple)"
            )));
        }
        hq / hk
    } else if lead == kv_lead {
        1
    } else {
        return Err(ReplayError::args(format!(
            "key's leading dims {kv_lead:?} differ from query's {lead:?}{}",
            if gqa { "" } else { " (enable_gqa is not set)" }
        )));
    };
    if v.shape()[..n - 2] != *kv_lead {
        return Err(ReplayError::args(format!(
            "value's leading dims {:?} differ from key's {kv_lead:?}",
            &v.shape()[..n - 2]
        )));
    }
    let h1: usize = lead.iter().product();
    let h2: usize = kv_lead.iter().product();
    let heads = Heads {
        q: to_heads(q, h1, l, e, "query")?,
        k: to_heads(k, h2, s, e, "key")?,
        v: to_heads(v, h2, s, ev, "value")?,
        group,
    };
    let scale = match args.get(6, "scale") {
        None => 1.0 / (e as f64).sqrt(),
        Some(x) => x
            .as_f64()
            .ok_or_else(|| ReplayError::args("scale is not a number"))?,
    };
    let causal = args.bool_or(5, "is_causal", false)?;
    let mask_value = args.get(3, "attn_mask");
    if causal && mask_value.is_some() {
        return Err(ReplayError::args(
            "both attn_mask and is_causal are given (torch refuses this call)",
        ));
    }
    let mut full: Vec<usize> = lead.to_vec();
    full.extend([l, s]);
    let (mask, bool_mask) = match mask_value {
        None => (None, false),
        Some(Value::Tensor(t)) => {
            let data = args.tensor(3, "attn_mask")?;
            let is_bool = t.dtype_name.to_ascii_lowercase().contains("bool");
            (Some(broadcast_mask(data, &full, "attn_mask")?), is_bool)
        }
        Some(_) => return Err(ReplayError::args("attn_mask is not a tensor")),
    };
    let scores = |h: usize, i: usize, dots: &mut [f64], mags: &mut [f64]| {
        // The mask's row for this head and query position (a view, no copy).
        let row = mask.as_ref().map(|m| {
            let mut view = m.view();
            for ix in unravel(h, lead).into_iter().chain([i]) {
                view = view.index_axis_move(Axis(0), ix);
            }
            view
        });
        for j in 0..dots.len() {
            dots[j] *= scale;
            mags[j] *= scale.abs();
            if causal && j > i {
                dots[j] = f64::NEG_INFINITY;
            }
            if let Some(w) = row.as_ref().and_then(|r| r.get(j)) {
                if bool_mask {
                    if *w == 0.0 {
                        dots[j] = f64::NEG_INFINITY;
                    }
                } else {
                    dots[j] += w;
                }
            }
        }
    };
    let (exact, sc) = attend(&heads, ctx.input_rounding(), &scores)?;
    let mut out_shape: Vec<usize> = lead.to_vec();
    out_shape.extend([l, ev]);
    Ok(vec![reference(exact, sc, &out_shape)?])
}

fn reference(exact: Array3<f64>, scale: Array3<f64>, shape: &[usize]) -> Result<Reference> {
    let err = |e: ndarray::ShapeError| ReplayError::args(e.to_string());
    Ok(Reference {
        exact: exact
            .into_dyn()
            .into_shape_with_order(IxDyn(shape))
            .map_err(err)?,
        scale: scale
            .into_dyn()
            .into_shape_with_order(IxDyn(shape))
            .map_err(err)?,
        budget: BUDGET,
    })
}

/// torch_npu's `input_layout`: where batch, sequence, heads and head dim are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Bsh,
    Sbh,
    Bsnd,
    Bnsd,
}

impl Layout {
    fn parse(s: &str) -> Result<Layout> {
        match s {
            "BSH" => Ok(Layout::Bsh),
            "SBH" => Ok(Layout::Sbh),
            "BSND" => Ok(Layout::Bsnd),
            "BNSD" => Ok(Layout::Bnsd),
            "TND" => Err(ReplayError::args(
                "input_layout TND (variable-length sequences packed along T) is not replayed: \
                 msprobe's own CPU reference does not support it either",
            )),
            other => Err(ReplayError::args(format!(
                "input_layout {other:?} is not one of BSH, SBH, BSND, BNSD, TND"
            ))),
        }
    }

    /// `(batch, seq, heads, head dim)` of a tensor in this layout with `heads` (for the
    /// 3-dim layouts) given.
    fn dims(self, x: &ArrayD<f64>, heads: Option<usize>, what: &str) -> Result<[usize; 4]> {
        let want = if matches!(self, Layout::Bsh | Layout::Sbh) {
            3
        } else {
            4
        };
        if x.ndim() != want {
            return Err(ReplayError::args(format!(
                "{what} of shape {:?} is not {want}-dim as input_layout {self:?} needs",
                x.shape()
            )));
        }
        let sh = x.shape();
        let split = |b: usize, s: usize, h: usize| -> Result<[usize; 4]> {
            let n = heads.ok_or_else(|| ReplayError::args("head count unknown"))?;
            if n == 0 || !h.is_multiple_of(n) {
                return Err(ReplayError::args(format!(
                    "{what}'s hidden size {h} is not a multiple of {n} heads"
                )));
            }
            Ok([b, s, n, h / n])
        };
        match self {
            Layout::Bsh => split(sh[0], sh[1], sh[2]),
            Layout::Sbh => split(sh[1], sh[0], sh[2]),
            Layout::Bsnd => Ok([sh[0], sh[1], sh[2], sh[3]]),
            Layout::Bnsd => Ok([sh[0], sh[2], sh[1], sh[3]]),
        }
    }

    /// `x` in this layout as `[batch·heads, seq, dim]`.
    fn to_heads(
        self,
        x: &ArrayD<f64>,
        [b, s, n, d]: [usize; 4],
        what: &str,
    ) -> Result<Array3<f64>> {
        let err = |e: ndarray::ShapeError| ReplayError::args(format!("{what}: {e}"));
        let bnsd = match self {
            Layout::Bsh => x
                .view()
                .into_shape_with_order(IxDyn(&[b, s, n, d]))
                .map_err(err)?
                .permuted_axes(IxDyn(&[0, 2, 1, 3])),
            Layout::Sbh => x
                .view()
                .into_shape_with_order(IxDyn(&[s, b, n, d]))
                .map_err(err)?
                .permuted_axes(IxDyn(&[1, 2, 0, 3])),
            Layout::Bsnd => x.view().permuted_axes(IxDyn(&[0, 2, 1, 3])),
            Layout::Bnsd => x.view(),
        };
        to_heads(&bnsd.to_owned(), b * n, s, d, what)
    }

    /// `[batch·heads, seq, dim]` back to this layout.
    fn heads_back(self, x: Array3<f64>, [b, s, n, d]: [usize; 4]) -> Result<ArrayD<f64>> {
        let err = |e: ndarray::ShapeError| ReplayError::args(e.to_string());
        let bnsd = x
            .into_dyn()
            .into_shape_with_order(IxDyn(&[b, n, s, d]))
            .map_err(err)?;
        let (order, shape): (&[usize], Vec<usize>) = match self {
            Layout::Bsh => (&[0, 2, 1, 3], vec![b, s, n * d]),
            Layout::Sbh => (&[2, 0, 1, 3], vec![s, b, n * d]),
            Layout::Bsnd => (&[0, 2, 1, 3], vec![b, s, n, d]),
            Layout::Bnsd => (&[0, 1, 2, 3], vec![b, n, s, d]),
        };
        bnsd.permuted_axes(IxDyn(order))
            .as_standard_layout()
            .into_owned()
            .into_shape_with_order(IxDyn(&shape))
            .map_err(err)
    }
}

/// Which positions `sparse_mode` masks, as msprobe's CPU reference builds the mask.
#[derive(Debug, Clone, Copy)]
enum Band {
    /// Nothing masked.
    None,
    /// Masked when `j − i > next` or `i − j > pre` (sparse_mode 0 and 4).
    Tokens { pre: i64, next: i64 },
    /// Masked when `j − i ≥ from` (sparse_mode 2: 1, causal from the top left; 3: `s2 − s1
    /// + 1`, causal from the bottom right).
    Above { from: i64 },
}

impl Band {
    fn of(sparse_mode: i64, pre: i64, next: i64, s1: usize, s2: usize) -> Band {
        match sparse_mode {
            0 | 4 => Band::Tokens { pre, next },
            2 => Band::Above { from: 1 },
            3 => Band::Above {
                from: s2 as i64 - s1 as i64 + 1,
            },
            _ => Band::None,
        }
    }

    fn masked(self, i: usize, j: usize) -> bool {
        let off = j as i64 - i as i64;
        match self {
            Band::None => false,
            Band::Tokens { pre, next } => off > next || -off > pre,
            Band::Above { from } => off >= from,
        }
    }
}

/// Side of the compressed mask torch_npu takes for sparse_mode 2, 3 and 4.
const COMPRESSED: usize = 2048;

/// Whether `mask` is the compressed `2048 × 2048` upper triangle (`triu(ones, 1)`).
fn is_compressed(mask: &ArrayD<f64>) -> bool {
    mask.shape() == [COMPRESSED, COMPRESSED]
        && mask
            .indexed_iter()
            .all(|(ix, &v)| v == if ix[1] > ix[0] { 1.0 } else { 0.0 })
}

/// `npu_fusion_attention(query, key, value, head_num, input_layout, *, pse=None,
/// padding_mask=None, atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=2147483647,
/// next_tockens=2147483647, inner_precise=0, prefix=None, sparse_mode=0, …)`: the attention
/// output (the first of its outputs; `softmax_max`, `softmax_sum`, `softmax_out`, `seed`,
/// `offset`, `numels` are not judged, as msprobe's pre-check judges the first only).
/// `keep_prob < 1` is random: not replayed.
pub fn npu_fusion_attention(args: &CallArgs, ctx: Context) -> Result<Vec<Reference>> {
    let q = args.tensor(0, "query")?;
    let k = args.tensor(1, "key")?;
    let v = args.tensor(2, "value")?;
    let head_num = args
        .get(3, "head_num")
        .and_then(Value::as_i64)
        .filter(|&n| n > 0)
        .ok_or_else(|| ReplayError::args("head_num is missing or not a positive int"))?
        as usize;
    let layout = Layout::parse(
        args.str(4, "input_layout")
            .ok_or_else(|| ReplayError::args("input_layout is missing"))?,
    )?;
    let qd = layout.dims(q, Some(head_num), "query")?;
    let [b, s1, n1, d] = qd;
    // The key's head count follows from the head dim (BSH/SBH: its hidden size over d).
    let kd = match layout {
        Layout::Bsh | Layout::Sbh => {
            let h2 = *k.shape().last().unwrap_or(&0);
            layout.dims(k, Some(h2.checked_div(d).unwrap_or(0)), "key")?
        }
        _ => layout.dims(k, None, "key")?,
    };
    let [kb, s2, n2, kdim] = kd;
    if kb != b || kdim != d || n2 == 0 || n1 % n2 != 0 {
        return Err(ReplayError::args(format!(
            "key {:?} does not fit query {:?} in layout {layout:?} ({n1} query heads, {n2} key heads)",
            k.shape(),
            q.shape()
        )));
    }
    let vd = match layout {
        Layout::Bsh | Layout::Sbh => layout.dims(v, Some(n2), "value")?,
        _ => layout.dims(v, None, "value")?,
    };
    if vd[0] != b || vd[1] != s2 || vd[2] != n2 {
        return Err(ReplayError::args(format!(
            "value {:?} does not fit key {:?}",
            v.shape(),
            k.shape()
        )));
    }
    let heads = Heads {
        q: layout.to_heads(q, qd, "query")?,
        k: layout.to_heads(k, kd, "key")?,
        v: layout.to_heads(v, vd, "value")?,
        group: n1 / n2,
    };
    let scale = args.f64_or(KEYWORD_ONLY, "scale", 1.0)?;
    let sparse_mode = args.f64_or(KEYWORD_ONLY, "sparse_mode", 0.0)? as i64;
    if !(0..=4).contains(&sparse_mode) {
        return Err(ReplayError::args(format!(
            "sparse_mode {sparse_mode} is not replayed (msprobe's CPU reference builds the masks of 0 to 4)"
        )));
    }
    let pre = args.f64_or(KEYWORD_ONLY, "pre_tockens", 2147483647.0)? as i64;
    let next = args.f64_or(KEYWORD_ONLY, "next_tockens", 2147483647.0)? as i64;
    let full = [b, n1, s1, s2];
    let given = args.opt_tensor(KEYWORD_ONLY, "atten_mask")?;
    // As msprobe's CPU reference: a given mask is taken as it is, except the compressed
    // 2048×2048 triangle of sparse_mode 2/3/4, which stands for that mode's mask; without a
    // mask, sparse_mode (and pre/next_tockens for 0 and 4) builds it.
    let (band, mask) = match given {
        Some(m) if (2..=4).contains(&sparse_mode) && is_compressed(m) => {
            (Band::of(sparse_mode, pre, next, s1, s2), None)
        }
        Some(m) => (Band::None, Some(broadcast_mask(m, &full, "atten_mask")?)),
        None => (Band::of(sparse_mode, pre, next, s1, s2), None),
    };
    let pse = match args.opt_tensor(KEYWORD_ONLY, "pse")? {
        Some(p) => Some(broadcast_mask(p, &full, "pse")?),
        None => None,
    };
    let scores = |h: usize, i: usize, dots: &mut [f64], mags: &mut [f64]| {
        let (bi, ni) = (h / n1, h % n1);
        for j in 0..dots.len() {
            let p = pse.as_ref().map_or(0.0, |p| p[IxDyn(&[bi, ni, i, j])]);
            dots[j] = (dots[j] + p) * scale;
            mags[j] = (mags[j] + p.abs()) * scale.abs();
            let masked = band.masked(i, j)
                || mask
                    .as_ref()
                    .is_some_and(|m| m[IxDyn(&[bi, ni, i, j])] != 0.0);
            if masked {
                dots[j] += NPU_MASKED;
            }
        }
    };
    let (exact, sc) = attend(&heads, ctx.input_rounding(), &scores)?;
    let dv = vd[3];
    let out = [b, s1, n1, dv];
    Ok(vec![Reference {
        exact: layout.heads_back(exact, out)?,
        scale: layout.heads_back(sc, out)?,
        budget: BUDGET,
    }])
}
