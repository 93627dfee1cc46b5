//! The checks of a side's parallel layout ([`crate::parallel`]) against its ranks, and
//! Megatron's default rank groups.

use crate::error::ConvertError;
use crate::parallel::ParallelParams;

fn usage(m: impl Into<String>) -> ConvertError {
    ConvertError::Usage(m.into())
}

/// msprobe's `validate_parallel_param`; `ranks`: the number of `rankN` folders; `side`:
/// `target` or `golden`, for the messages.
pub fn validate(p: &ParallelParams, ranks: usize, side: &str) -> Result<(), ConvertError> {
    let bad = |m: String| usage(format!("{side}: {m}"));
    if p.rank_size != ranks as i64 {
        return Err(bad(format!(
            "--rank_size is {} but the dump has {ranks} rank folder(s)",
            p.rank_size
        )));
    }
    for (name, v) in [
        ("--tp", p.tp),
        ("--pp", p.pp),
        ("--rank_size", p.rank_size),
        ("--vpp", p.vpp),
    ] {
        if v <= 0 {
            return Err(bad(format!("{name} must be greater than 0 (got {v})")));
        }
    }
    if p.tp > p.rank_size {
        return Err(bad(format!(
            "--tp {} is larger than --rank_size {}",
            p.tp, p.rank_size
        )));
    }
    if p.pp > p.rank_size {
        return Err(bad(format!(
            "--pp {} is larger than --rank_size {}",
            p.pp, p.rank_size
        )));
    }
    if p.rank_size % p.tp != 0 {
        return Err(bad(format!(
            "--rank_size {} is not divisible by --tp {}",
            p.rank_size, p.tp
        )));
    }
    if p.rank_size % p.pp != 0 {
        return Err(bad(format!(
            "--rank_size {} is not divisible by --pp {}",
            p.rank_size, p.pp
        )));
    }
    if p.tp * p.pp > p.rank_size || p.rank_size % (p.tp * p.pp) != 0 {
        return Err(bad(format!(
            "--tp × --pp ({} × {}) does not divide --rank_size {}",
            p.tp, p.pp, p.rank_size
        )));
    }
    if p.vpp > 1 && p.pp < 2 {
        return Err(bad(format!(
            "--vpp {} needs --pp of at least 2 (got {})",
            p.vpp, p.pp
        )));
    }
    if p.order.is_empty() || !p.order.bytes().all(|b| b.is_ascii_lowercase() || b == b'-') {
        return Err(bad(format!(
            "--order {:?} must consist only of lowercase letters and '-'",
            p.order
        )));
    }
    default_groups(p).map(|_| ())
}

/// Lists of ranks, one per group.
pub type Groups = Vec<Vec<i64>>;

/// Megatron's rank groups for the layout (`get_tp_pp_default_groups`): `(tp groups, pp groups)`.
pub fn default_groups(p: &ParallelParams) -> Result<(Groups, Groups), ConvertError> {
    let bad = |m: String| usage(format!("--order {:?}: {m}", p.order));
    if p.tp <= 0 || p.pp <= 0 || p.rank_size % (p.tp * p.pp) != 0 {
        return Err(usage(format!(
            "--rank_size {} is not divisible by --tp × --pp ({} × {})",
            p.rank_size, p.tp, p.pp
        )));
    }
    let dp = p.rank_size / (p.tp * p.pp);
    let sizes = |name: &str| -> Option<i64> {
        match name {
            "tp" => Some(p.tp),
            "pp" => Some(p.pp),
            "dp" => Some(dp),
            "ep" | "cp" => Some(1),
            _ => None,
        }
    };
    let mut order: Vec<String> = p
        .order
        .to_lowercase()
        .split('-')
        .map(str::to_string)
        .collect();
    if order.iter().any(|t| t == "ep") {
        let joined = order.join("-");
        if !joined.contains("ep-dp") && !joined.contains("dp-ep") {
            return Err(bad("ep and dp must be adjacent".into()));
        }
    }
    for name in ["tp", "pp", "dp", "ep", "cp"] {
        if !order.iter().any(|t| t == name) {
            if sizes(name) != Some(1) {
                return Err(bad(format!(
                    "the parallel size {name} is {} but {name} is not in the order",
                    sizes(name).unwrap_or(0)
                )));
            }
            order.push(name.to_string());
        }
    }
    // Without ep: the dimensions in order, each with its size.
    let dims: Vec<(String, i64)> = order
        .iter()
        .filter(|t| t.as_str() != "ep")
        .map(|t| {
            sizes(t)
                .map(|s| (t.clone(), s))
                .ok_or_else(|| bad(format!("unknown parallel dimension {t:?}")))
        })
        .collect::<Result<_, _>>()?;
    let tp = masked_groups(p.rank_size, &dims, "tp");
    let pp = masked_groups(p.rank_size, &dims, "pp");
    Ok((tp, pp))
}

/// Megatron's `generate_masked_orthogonal_rank_groups` for one token.
fn masked_groups(total: i64, dims: &[(String, i64)], token: &str) -> Vec<Vec<i64>> {
    let mut strides = Vec::with_capacity(dims.len());
    let mut acc = 1i64;
    for (_, d) in dims {
        strides.push(acc);
        acc *= d;
    }
    let masked: Vec<(i64, i64)> = dims
        .iter()
        .zip(&strides)
        .filter(|((n, _), _)| n == token)
        .map(|((_, d), s)| (*d, *s))
        .collect();
    let unmasked: Vec<(i64, i64)> = dims
        .iter()
        .zip(&strides)
        .filter(|((n, _), _)| n != token)
        .map(|((_, d), s)| (*d, *s))
        .collect();
    let group_size: i64 = masked.iter().map(|(d, _)| d).product();
    let count = if group_size > 0 {
        total / group_size
    } else {
        0
    };
    let decompose = |mut index: i64, shape: &[(i64, i64)]| -> Vec<i64> {
        shape
            .iter()
            .map(|(d, _)| {
                let v = index % d;
                index /= d;
                v
            })
            .collect()
    };
    (0..count)
        .map(|g| {
            let gi = decompose(g, &unmasked);
            let base: i64 = gi.iter().zip(&unmasked).map(|(i, (_, s))| i * s).sum();
            (0..group_size)
                .map(|r| {
                    let ri = decompose(r, &masked);
                    base + ri.iter().zip(&masked).map(|(i, (_, s))| i * s).sum::<i64>()
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn megatron_default_groups() {
        let p = ParallelParams::new(8, 2, 2);
        let (tp, pp) = default_groups(&p).unwrap();
        assert_eq!(tp, vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        assert_eq!(pp, vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
        let (tp, pp) = default_groups(&ParallelParams::new(4, 4, 1)).unwrap();
        assert_eq!(tp, vec![vec![0, 1, 2, 3]]);
        assert_eq!(pp, vec![vec![0], vec![1], vec![2], vec![3]]);
        let (tp, pp) = default_groups(&ParallelParams::new(4, 1, 2)).unwrap();
        assert_eq!(tp, vec![vec![0], vec![1], vec![2], vec![3]]);
        assert_eq!(pp, vec![vec![0, 2], vec![1, 3]]);
        let mut p = ParallelParams::new(8, 2, 2);
        p.order = "tp-pp-dp".into();
        let (tp, pp) = default_groups(&p).unwrap();
        assert_eq!(tp[1], vec![2, 3]);
        assert_eq!(pp, vec![vec![0, 2], vec![1, 3], vec![4, 6], vec![5, 7]]);
    }

    #[test]
    fn bad_layouts_are_named() {
        let msg = |p: ParallelParams, ranks| validate(&p, ranks, "target").unwrap_err().to_string();
        assert!(msg(ParallelParams::new(4, 2, 1), 2).contains("rank folder"));
        assert!(msg(ParallelParams::new(6, 4, 1), 6).contains("not divisible by --tp"));
        assert!(msg(ParallelParams::new(8, 4, 4), 8).contains("does not divide"));
        let mut p = ParallelParams::new(4, 2, 1);
        p.vpp = 2;
        assert!(msg(p, 4).contains("--vpp 2 needs --pp"));
        let mut p = ParallelParams::new(4, 2, 1);
        p.order = "TP-dp".into();
        assert!(msg(p, 4).contains("lowercase"));
        let mut p = ParallelParams::new(4, 2, 2);
        p.order = "tp-dp".into();
        assert!(msg(p, 4).contains("not in the order"));
    }
}
