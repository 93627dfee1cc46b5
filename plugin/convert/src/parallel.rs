//! The parallel layout of a run (`--rank_size --tp --pp --vpp --order`), as the flags give it:
//! part of a conversion's options; the parallel merge ([`crate::merge`]) checks it against
//! the ranks and makes Megatron's rank groups from it.

use crate::error::ConvertError;

/// The layout of one side (msprobe's `ParallelParam`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParallelParams {
    pub rank_size: i64,
    pub tp: i64,
    pub pp: i64,
    pub vpp: i64,
    /// Megatron rank order, e.g. `tp-cp-ep-dp-pp`.
    pub order: String,
}

pub const DEFAULT_ORDER: &str = "tp-cp-ep-dp-pp";

impl ParallelParams {
    pub fn new(rank_size: i64, tp: i64, pp: i64) -> ParallelParams {
        ParallelParams {
            rank_size,
            tp,
            pp,
            vpp: 1,
            order: DEFAULT_ORDER.to_string(),
        }
    }
}

/// msprobe's `load_parallel_param`: the flags as typed (each may hold several values) → one
/// layout for a build, two (target, golden) for a compare.
pub fn from_flags(
    rank_size: &[i64],
    tp: &[i64],
    pp: &[i64],
    vpp: &[i64],
    order: &[String],
    compare: bool,
) -> Result<Vec<ParallelParams>, ConvertError> {
    if rank_size.is_empty() || tp.is_empty() || pp.is_empty() {
        return Err(ConvertError::Usage(
            "parallel merge needs all of --rank_size, --tp and --pp".into(),
        ));
    }
    let want = if compare { 2 } else { 1 };
    let what = if compare {
        "a compare (-gp) takes two values each (target, golden)"
    } else {
        "a build takes one value each"
    };
    for (name, n) in [
        ("--rank_size", rank_size.len()),
        ("--tp", tp.len()),
        ("--pp", pp.len()),
    ] {
        if n != want {
            return Err(ConvertError::Usage(format!(
                "{name} has {n} value(s): in a parallel merge {what}"
            )));
        }
    }
    if vpp.len() > want || order.len() > want {
        return Err(ConvertError::Usage(format!(
            "--vpp/--order have too many values: {what}"
        )));
    }
    let pick_vpp = |i: usize| {
        if vpp.len() == want {
            vpp[i]
        } else if !compare && !vpp.is_empty() {
            vpp[0]
        } else {
            1
        }
    };
    let pick_order = |i: usize| {
        if order.len() == want {
            order[i].clone()
        } else if !compare && !order.is_empty() {
            order[0].clone()
        } else {
            DEFAULT_ORDER.to_string()
        }
    };
    Ok((0..want)
        .map(|i| ParallelParams {
            rank_size: rank_size[i],
            tp: tp[i],
            pp: pp[i],
            vpp: pick_vpp(i),
            order: pick_order(i),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_give_one_layout_a_side() {
        assert!(from_flags(&[2], &[2], &[1], &[], &[], true).is_err());
        assert!(from_flags(&[2, 2], &[2, 2], &[1], &[], &[], true).is_err());
        assert_eq!(
            from_flags(&[2], &[2], &[1], &[], &[], false).unwrap(),
            vec![ParallelParams::new(2, 2, 1)]
        );
    }
}
