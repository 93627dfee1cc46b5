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
/// An op kind needs this many judged nodes to learn its noise from their [`QUANTILE`].
pub const MIN_SAMPLES: usize = 8;
/// With fewer than [`MIN_SAMPLES`] but at least this many (an op called a few times a step:
/// attention's softmax, an activation), a kind learns from the **median** of its samples, which
/// one faulty call cannot move, times [`SMALL_SAMPLE_MARGIN`]; fewer keep the dtype table (and
/// say so: [`LearnedTolerances::few_samples`]).
pub const MIN_SMALL_SAMPLES: usize = 3;
/// The tolerance of a kind learned from few samples: this many times their median. The p95 of
/// a half-normal error is 2.9 times its median, so this is [`MARGIN`] × p95 × 1.7: the p95 of
/// three or four samples is their maximum, uncertain by a factor of about two across seeds,
/// and the margin covers it (the sweeps' noise-only pairs, docs/diagnosis.md §13).
pub const SMALL_SAMPLE_MARGIN: f64 = 10.0;
/// Samples further than this many robust standard deviations (1.4826 × the median absolute
/// deviation) above the median are outliers — a faulty call, the nodes it reached — and do not
/// teach the tolerance of their kind (at most the top 5 % of a kind's samples, at least one).
pub const OUTLIER_MADS: f64 = 8.0;
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
    /// How its noise was estimated.
    pub estimate: Estimate,
    /// Samples left out as outliers ([`OUTLIER_MADS`]).
    pub outliers: usize,
}

/// How a kind's noise was estimated from its samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Estimate {
    /// [`MARGIN`] × their [`QUANTILE`] ([`MIN_SAMPLES`] or more).
    Quantile,
    /// [`SMALL_SAMPLE_MARGIN`] × their median (fewer than [`MIN_SAMPLES`]).
    SmallSample,
}

/// An op kind with too few samples to learn from: it kept the dtype table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FewSamples {
    pub op: String,
    pub direction: Direction,
    pub dtype: DtypeClass,
    pub samples: usize,
}

/// Learned tolerances, looked up by op kind, pass and noise class.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LearnedTolerances {
    pub from: LearnedFrom,
    /// Sorted by op kind, pass, dtype.
    pub kinds: Vec<Learned>,
    /// Kinds the data held too few times to learn from ([`MIN_SMALL_SAMPLES`]), which keep
    /// the table (from a reference: and the compare's own tightening), sorted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub few_samples: Vec<FewSamples>,
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
pub(crate) struct Samples {
    pub(crate) outputs: Vec<f64>,
    pub(crate) inputs: Vec<f64>,
    /// The finest dtype class of the entries measured (float32 for an fp32 op in a bf16 run).
    pub(crate) finest: DtypeClass,
}

impl Default for Samples {
    fn default() -> Samples {
        Samples {
            outputs: Vec::new(),
            inputs: Vec::new(),
            finest: DtypeClass::Other,
        }
    }
}

/// The median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    quantile(v, 0.5)
}

/// Leaves out of `v` the samples more than [`OUTLIER_MADS`] robust standard deviations above
/// the median, the largest first and at most 5 % of them (at least one); how many. Needs five
/// samples (below, the median alone is the estimate).
fn drop_outliers(v: &mut Vec<f64>) -> usize {
    if v.len() < 5 {
        return 0;
    }
    let m = median(v);
    let mut dev: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
    let sigma = 1.4826 * median(&mut dev);
    if sigma <= 0.0 {
        return 0;
    }
    let limit = m + OUTLIER_MADS * sigma;
    // At most the top 5 % (what the quantile leaves out anyway, at least one): a heavy-tailed
    // kind (the optimizer's updates) keeps its tail, one faulty call is left out.
    let most = v.len().div_ceil(20);
    v.sort_by(f64::total_cmp);
    let mut dropped = 0;
    while dropped < most && v.last().is_some_and(|&x| x > limit) {
        v.pop();
        dropped += 1;
    }
    dropped
}

/// The noise of a kind's samples: robust ([`drop_outliers`]), then their [`QUANTILE`] with
/// [`MIN_SAMPLES`] or more, else their median; and the factor that makes it a tolerance.
fn noise_of(v: &mut Vec<f64>) -> (f64, f64, Estimate, usize) {
    let dropped = drop_outliers(v);
    if v.len() >= MIN_SAMPLES {
        (quantile(v, QUANTILE), MARGIN, Estimate::Quantile, dropped)
    } else {
        (
            median(v),
            SMALL_SAMPLE_MARGIN,
            Estimate::SmallSample,
            dropped,
        )
    }
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
    pub(crate) fn new(
        from: LearnedFrom,
        mut kinds: Vec<Learned>,
        mut few_samples: Vec<FewSamples>,
    ) -> LearnedTolerances {
        kinds.sort_by(|a, b| (&a.op, a.direction, a.dtype).cmp(&(&b.op, b.direction, b.dtype)));
        few_samples
            .sort_by(|a, b| (&a.op, a.direction, a.dtype).cmp(&(&b.op, b.direction, b.dtype)));
        let mut index: HashMap<String, Vec<usize>> = HashMap::default();
        for (k, l) in kinds.iter().enumerate() {
            index.entry(l.op.clone()).or_default().push(k);
        }
        LearnedTolerances {
            from,
            kinds,
            few_samples,
            index,
        }
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

/// The tolerance of one op kind from its samples ([`noise_of`]: [`MARGIN`] times their
/// [`QUANTILE`], or with few samples [`SMALL_SAMPLE_MARGIN`] times their median, outliers left
/// out), for its outputs (agree and jump alike: the kind's own noise) and its activation inputs
/// (`table`'s agree when it has none). With `cap` (outputs, inputs' agree), never above it.
pub(crate) fn learn(
    key: Key,
    mut s: Samples,
    table: Tolerance,
    cap: Option<(Tolerance, f64)>,
) -> Learned {
    let (op, direction, dtype) = key;
    let samples = s.outputs.len();
    let (output_noise, factor, estimate, outliers) = noise_of(&mut s.outputs);
    let (input_noise, input_factor, _, _) = noise_of(&mut s.inputs);
    let input_agree = if s.inputs.is_empty() {
        table.agree
    } else {
        input_factor * input_noise
    };
    let output = factor * output_noise;
    let (output, input_agree) = match cap {
        // From a reference: no tolerance is below float32's epsilon. The statistics are
        // computed and stored in float32 at best, so a smaller difference is their own rounding
        // (an fp32 op whose reference calls agree to 1e-9 does not make one rounding of a
        // statistic a fault).
        None => {
            let eps = DtypeClass::Float32.epsilon();
            let output = output.max(eps);
            (
                Tolerance {
                    agree: output,
                    jump: output,
                },
                input_agree.max(eps),
            )
        }
        // Tightening never goes below one unit of round-off of the op's own dtype (the
        // finest its entries hold: an fp32 op in a bf16 model is judged by fp32's floor, not
        // bf16's epsilon): a compare whose calls of a kind happen to agree bit for bit does not
        // make one rounding a fault.
        Some((c, agree)) => {
            let eps = s.finest.epsilon();
            let floor = |v: f64| v.max(eps);
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
        samples,
        output_noise,
        input_noise,
        output,
        input_agree,
        estimate,
        outliers,
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
    fn one_faulty_call_does_not_move_the_noise_of_its_kind() {
        let noise: Vec<f64> = (0..16)
            .map(|k| 1e-3 * (1.0 + 0.05 * f64::from(k)))
            .collect();
        let (clean, ..) = noise_of(&mut noise.clone());
        let mut with_fault = noise.clone();
        with_fault.push(3e-2);
        let (robust, _, estimate, dropped) = noise_of(&mut with_fault);
        assert_eq!((estimate, dropped), (Estimate::Quantile, 1));
        assert!((robust - clean).abs() < 1e-12, "{robust} vs {clean}");
        // Four calls, one of them faulty: the median.
        let (small, factor, estimate, _) = noise_of(&mut vec![1e-3, 1.2e-3, 0.9e-3, 5e-2]);
        assert_eq!(
            (estimate, factor),
            (Estimate::SmallSample, SMALL_SAMPLE_MARGIN)
        );
        assert!((small - 1.1e-3).abs() < 1e-12, "{small}");
    }

    #[test]
    fn a_reference_tolerance_is_never_below_float32_epsilon() {
        // Four fp32 calls that agree to 2.4e-9 (an RMSNorm's muls on exact inputs).
        let s = Samples {
            outputs: vec![2.0e-9, 2.4e-9, 2.2e-9, 2.3e-9],
            inputs: vec![1.0e-9; 4],
            finest: DtypeClass::Float32,
        };
        let key = (
            "Tensor.__mul__".to_owned(),
            Direction::Forward,
            DtypeClass::Float32,
        );
        let table = Tolerance {
            agree: 1e-6,
            jump: 1e-2,
        };
        let l = learn(key, s, table, None);
        let eps = f64::from(f32::EPSILON);
        assert_eq!(
            (l.output.agree, l.output.jump, l.input_agree),
            (eps, eps, eps)
        );
    }

    #[test]
    fn the_quantile_is_the_nearest_rank() {
        let mut v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert!((quantile(&mut v, 0.95) - 19.05).abs() < 1e-12);
        assert_eq!(quantile(&mut v, 0.5), 10.5);
        assert_eq!(quantile(&mut [3.0], 0.95), 3.0);
    }
}
