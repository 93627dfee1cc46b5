//! Tolerances: the two thresholds of a relative error ([`Tolerance`]), and those learned from
//! data per **op kind** (an API such as `Functional.linear`, or a module class such as
//! `Linear`), pass and noise class ([`LearnedTolerances`]), instead of one pair of numbers per
//! dtype (docs/diagnosis.md §13, "Tolerances from data"). How they are learned, from a reference
//! compare or from the compare itself, is [`crate::learn`].

use std::path::PathBuf;

use foldhash::HashMap;

use crate::entry::DtypeClass;
use crate::load::{Direction, NodeRef};

/// Two thresholds on a relative error (see [`crate::judge`] for how errors are measured).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Tolerance {
    /// Up to this, an input or a parameter agrees with golden (noise).
    pub agree: f64,
    /// Above this, an output differs enough to be a fault rather than noise.
    pub jump: f64,
}

/// The quantile of a kind's errors in the reference taken as its noise.
pub const QUANTILE: f64 = 0.95;
/// The learned tolerance is this many times the reference's noise: a node as noisy as the
/// worst 5 % of its kind in the reference, twice over, is not a fault.
pub const MARGIN: f64 = 2.0;
/// An op kind needs this many judged nodes to learn from; fewer keep the dtype table.
pub const MIN_SAMPLES: usize = 8;
/// A reference must hold at least this share of the judged file's module names (without call
/// indexes) and of its op kinds: otherwise its golden is another model.
pub const MIN_SHARED: f64 = 0.5;

/// Where a learned tolerance came from.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LearnedFrom {
    /// A reference compare (`--reference FILE`).
    Reference { file: PathBuf },
    /// The compare itself, where its noise is below the dtype table.
    Tightened,
}

impl std::fmt::Display for LearnedFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LearnedFrom::Reference { file } => write!(f, "reference {}", file.display()),
            LearnedFrom::Tightened => f.write_str("tightened"),
        }
    }
}

/// The tolerance of one op kind, pass and noise class.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Learned {
    /// `Functional.linear`, `Module.Linear`.
    pub op: String,
    pub direction: Direction,
    /// The noise class the errors were measured in (the coarser of the entry's dtype and the
    /// run's precision floor).
    pub dtype: DtypeClass,
    /// Nodes learned from.
    pub samples: usize,
    /// The kind's output noise: [`QUANTILE`] of its output errors (reference) or their median
    /// (tightened).
    pub output_noise: f64,
    /// The same of its activation inputs' errors.
    pub input_noise: f64,
    /// For its outputs.
    pub output: Tolerance,
    /// Up to this, its activation inputs agree.
    pub input_agree: f64,
}

/// Learned tolerances, looked up by op kind, pass and noise class.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LearnedTolerances {
    pub from: LearnedFrom,
    /// Sorted by op kind, pass, dtype.
    pub kinds: Vec<Learned>,
    #[serde(skip)]
    index: HashMap<String, Vec<usize>>,
}

/// A node's op kind: the API without its call index and pass (`Functional.linear`), or the
/// module's class (`Linear`, from `Module.layers.0.mlp.fc1.Linear.forward.0`).
pub fn op_kind<'a>(n: NodeRef<'a>) -> &'a str {
    if n.node_type != 0 {
        return crate::site::api_kind(n.name());
    }
    // <Prefix>.<path…>.<Class>.<forward|backward>.<index>
    let mut parts = n.name().rsplit('.');
    let mut class = "";
    let mut pass_seen = false;
    for p in parts.by_ref() {
        if pass_seen {
            class = p;
            break;
        }
        pass_seen = p == "forward" || p == "backward";
    }
    if class.is_empty() {
        n.name()
    } else {
        class
    }
}

/// The samples of one key while learning.
#[derive(Default)]
pub(crate) struct Samples {
    pub(crate) outputs: Vec<f64>,
    pub(crate) inputs: Vec<f64>,
}

/// An op kind, its pass and noise class.
pub(crate) type Key = (String, Direction, DtypeClass);

/// The `q` quantile of `v`, linearly interpolated between the order statistics around rank
/// `q (n - 1)` (the usual estimator: the sample's maximum counts only when `n` is small);
/// `v` is sorted in place.
pub(crate) fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let at = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let (lo, frac) = (at.floor() as usize, at.fract());
    match v.get(lo + 1) {
        Some(hi) => v[lo] + frac * (hi - v[lo]),
        None => v[lo],
    }
}

impl LearnedTolerances {
    pub(crate) fn new(from: LearnedFrom, mut kinds: Vec<Learned>) -> LearnedTolerances {
        kinds.sort_by(|a, b| (&a.op, a.direction, a.dtype).cmp(&(&b.op, b.direction, b.dtype)));
        let mut index: HashMap<String, Vec<usize>> = HashMap::default();
        for (k, l) in kinds.iter().enumerate() {
            index.entry(l.op.clone()).or_default().push(k);
        }
        LearnedTolerances { from, kinds, index }
    }

    /// The learned tolerance of an op kind in a pass and noise class, if any.
    pub fn get(&self, op: &str, direction: Direction, dtype: DtypeClass) -> Option<&Learned> {
        self.index
            .get(op)?
            .iter()
            .map(|&k| &self.kinds[k])
            .find(|l| l.direction == direction && l.dtype == dtype)
    }
}

/// The tolerance of one op kind from its samples: [`MARGIN`] times their [`QUANTILE`], for its
/// outputs (agree and jump alike: the kind's own noise) and its activation inputs (`table`'s
/// agree when it has none). With `cap` (outputs, inputs' agree), never above it.
pub(crate) fn learn(
    key: Key,
    mut s: Samples,
    table: Tolerance,
    cap: Option<(Tolerance, f64)>,
) -> Learned {
    let (op, direction, dtype) = key;
    let output_noise = quantile(&mut s.outputs, QUANTILE);
    let input_noise = quantile(&mut s.inputs, QUANTILE);
    let input_agree = if s.inputs.is_empty() {
        table.agree
    } else {
        MARGIN * input_noise
    };
    let output = MARGIN * output_noise;
    let (output, input_agree) = match cap {
        None => (
            Tolerance {
                agree: output,
                jump: output,
            },
            input_agree,
        ),
        // Tightening never goes below one unit of round-off of the noise class: a compare
        // whose calls of a kind happen to agree bit for bit does not make one rounding a fault.
        Some((c, agree)) => {
            let floor = |v: f64| v.max(dtype.epsilon());
            (
                Tolerance {
                    agree: floor(output).min(c.agree),
                    jump: floor(output).min(c.jump),
                },
                floor(input_agree).min(agree),
            )
        }
    };
    Learned {
        op,
        direction,
        dtype,
        samples: s.outputs.len(),
        output_noise,
        input_noise,
        output,
        input_agree,
    }
}

/// A module's name without its call index (`Module.layers.0.mlp.fc1.Linear.forward`); an API's
/// kind.
pub(crate) fn module_path<'a>(n: NodeRef<'a>) -> &'a str {
    if n.node_type == 0 {
        match n.name().rsplit_once('.') {
            Some((head, tail)) if tail.bytes().all(|b| b.is_ascii_digit()) => head,
            _ => n.name(),
        }
    } else {
        crate::site::api_kind(n.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_op_kind_is_the_api_or_the_module_class() {
        let mut side = crate::load::SideGraph::default();
        for (name, t) in [
            ("Functional.linear.12.forward", 1),
            ("Module.layers.0.mlp.fc1.Linear.forward.0", 0),
            ("Module.Block.backward.3", 0),
        ] {
            let node = crate::load::Node::new(t, crate::load::Direction::Forward, false, 0);
            side.push(name, node, [], 0).expect("small");
        }
        assert_eq!(op_kind(side.node(0)), "Functional.linear");
        assert_eq!(op_kind(side.node(1)), "Linear");
        assert_eq!(op_kind(side.node(2)), "Block");
    }

    #[test]
    fn the_quantile_is_the_nearest_rank() {
        let mut v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert!((quantile(&mut v, 0.95) - 19.05).abs() < 1e-12);
        assert_eq!(quantile(&mut v, 0.5), 10.5);
        assert_eq!(quantile(&mut [3.0], 0.95), 3.0);
    }
}
