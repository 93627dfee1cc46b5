//! The rules for one matched node: how far each entry is from golden, and whether the node's
//! error is introduced here (inputs agree, outputs jump), caused by a differing weight or
//! argument, amplified far beyond what came in, or inherited from its inputs.
//!
//! # Measuring one entry
//! Every mode gives one relative error per entry, so that one set of tolerances applies:
//! - statistics: `|ΔNorm| / |Norm|`, and `|ΔMax|`, `|ΔMin|`, `|ΔMean|` divided by the tensor's
//!   scale `max(|Max|, |Min|)` of both sides: a mean near zero (a LayerNorm's output) has a huge
//!   relative error that means nothing, while its difference against the tensor's range does.
//! - tensor: the statistics as above, plus `sqrt(2 (1 - Cosine))` (the distance between the two
//!   tensors as unit vectors: linear in the relative error, unlike `1 - Cosine`) and
//!   `MaxAbsErr / scale`. `MaxRelativeErr` and the ‰ ratios are left out: near-zero elements
//!   make them large in healthy runs.
//! - md5: equal (0) or not (infinite): no magnitude.
//!
//! A non-finite statistic on one side only is an infinite error; the same inf/NaN on both sides
//! agrees.

use std::borrow::Cow;

use crate::api;
use crate::entry::{DtypeClass, Entry, Kind, Role, Stats};
use crate::load::{Mode, Node};
use crate::options::{Options, Tolerance};

/// Which measurement gave an entry's error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Metric {
    Norm,
    Max,
    Min,
    Mean,
    Cosine,
    MaxAbsErr,
    Md5,
    /// inf/NaN on one side only.
    NonFinite,
}

impl Metric {
    pub fn label(self) -> &'static str {
        match self {
            Metric::Norm => "Norm",
            Metric::Max => "Max",
            Metric::Min => "Min",
            Metric::Mean => "Mean",
            Metric::Cosine => "Cosine distance",
            Metric::MaxAbsErr => "MaxAbsErr",
            Metric::Md5 => "md5",
            Metric::NonFinite => "inf/NaN",
        }
    }
}

/// How far one entry is from golden.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Deviation {
    /// Relative error (infinite: md5 differs, or inf/NaN on one side only).
    pub err: f64,
    pub metric: Metric,
}

/// The worst entry of a group, with the tolerance of its dtypes.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Level<'a> {
    pub entry: Cow<'a, str>,
    pub err: f64,
    pub metric: Metric,
    pub tolerance: Tolerance,
    pub dtype: DtypeClass,
}

impl Level<'_> {
    pub fn agrees(&self) -> bool {
        self.err <= self.tolerance.agree
    }

    pub fn into_owned(self) -> Level<'static> {
        Level {
            entry: Cow::Owned(self.entry.into_owned()),
            ..self
        }
    }
}

/// A weight or non-tensor argument that differs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Cause<'a> {
    /// A module parameter or the weight argument of an API.
    Parameter {
        name: Cow<'a, str>,
        level: Level<'a>,
    },
    /// A non-tensor argument (`eps`, a dropout `p`).
    Argument {
        name: Cow<'a, str>,
        target: Cow<'a, str>,
        golden: Cow<'a, str>,
    },
}

impl Cause<'_> {
    pub fn into_owned(self) -> Cause<'static> {
        let own = |c: Cow<'_, str>| Cow::Owned(c.into_owned());
        match self {
            Cause::Parameter { name, level } => Cause::Parameter {
                name: own(name),
                level: level.into_owned(),
            },
            Cause::Argument {
                name,
                target,
                golden,
            } => Cause::Argument {
                name: own(name),
                target: own(target),
                golden: own(golden),
            },
        }
    }
}

/// Everything the rules found about one matched node.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement<'a> {
    /// The worst activation input (weights excluded), if any input could be compared.
    pub input: Option<Level<'a>>,
    /// The worst output, if any output could be compared.
    pub output: Option<Level<'a>>,
    /// Differing weights and arguments.
    pub causes: Vec<Cause<'a>>,
    /// Whether the node has anything that decides its output besides activations (so that
    /// "inputs agree" means something for a node without tensor inputs).
    pub has_inputs: bool,
}

impl Judgement<'_> {
    /// The error of the inputs (0 when none).
    pub fn input_err(&self) -> f64 {
        self.input.as_ref().map_or(0.0, |l| l.err)
    }

    pub fn inputs_agree(&self) -> bool {
        self.input.as_ref().is_none_or(Level::agrees)
    }

    /// The outputs differ beyond noise.
    pub fn output_differs(&self) -> bool {
        self.output.as_ref().is_some_and(|l| !l.agrees())
    }

    /// The outputs are above the jump tolerance and `ratio` times worse than the inputs.
    pub fn output_jumps(&self, ratio: f64) -> bool {
        self.output
            .as_ref()
            .is_some_and(|l| l.err > l.tolerance.jump && l.err > ratio * self.input_err())
    }

    /// Any difference beyond noise: inputs, outputs or causes.
    pub fn differs(&self) -> bool {
        !self.inputs_agree() || self.output_differs() || !self.causes.is_empty()
    }

    /// How much worse the outputs are than the inputs (`None` in md5 mode or without outputs).
    pub fn score(&self) -> Option<f64> {
        let out = self.output.as_ref()?;
        if !out.err.is_finite() {
            return None;
        }
        let floor = self.input.as_ref().map_or(out.dtype, |l| l.dtype).epsilon();
        let floor = if floor > 0.0 { floor } else { f64::EPSILON };
        Some(out.err / self.input_err().max(floor))
    }
}

/// `d / base`; a difference against a zero base is unbounded.
fn rel(d: f64, base: f64) -> f64 {
    if d == 0.0 {
        0.0
    } else if base > 0.0 {
        d / base
    } else {
        f64::INFINITY
    }
}

/// Statistics deviation of two tensors.
fn stats_deviation(n: &Stats, b: &Stats) -> Option<Deviation> {
    let pairs = [
        (n.norm(), b.norm(), Metric::Norm),
        (n.max(), b.max(), Metric::Max),
        (n.min(), b.min(), Metric::Min),
        (n.mean(), b.mean(), Metric::Mean),
    ];
    let scale = [n.max(), n.min(), b.max(), b.min()]
        .into_iter()
        .flatten()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let mut worst: Option<Deviation> = None;
    for (x, y, metric) in pairs {
        let (Some(x), Some(y)) = (x, y) else { continue };
        let err = if !x.is_finite() || !y.is_finite() {
            let same = (x.is_nan() && y.is_nan()) || x == y;
            if same {
                0.0
            } else {
                return Some(Deviation {
                    err: f64::INFINITY,
                    metric: Metric::NonFinite,
                });
            }
        } else if metric == Metric::Norm {
            rel((x - y).abs(), y.abs())
        } else {
            rel((x - y).abs(), scale)
        };
        if worst.is_none_or(|w| err > w.err) {
            worst = Some(Deviation { err, metric });
        }
    }
    worst
}

/// How far target entry `n` is from golden entry `b` in `mode` (`None`: not comparable).
pub fn deviation(mode: Mode, n: &Entry, b: &Entry) -> Option<Deviation> {
    if n.kind != Kind::Tensor || b.kind != Kind::Tensor {
        return None;
    }
    // Different shapes hold different things (a framework's reshaped view, another layout):
    // their numbers say nothing about each other.
    if n.shape != 0 && b.shape != 0 && n.shape != b.shape {
        return None;
    }
    match mode {
        Mode::Md5 => {
            let (x, y) = (n.md5.as_deref()?, b.md5.as_deref()?);
            Some(Deviation {
                err: if x == y { 0.0 } else { f64::INFINITY },
                metric: Metric::Md5,
            })
        }
        Mode::Statistics => stats_deviation(&n.stats, &b.stats),
        Mode::Tensor => {
            let mut worst = stats_deviation(&n.stats, &b.stats);
            if let Some(m) = n.metrics.as_deref() {
                let scale = [n.stats.max(), n.stats.min()]
                    .into_iter()
                    .flatten()
                    .filter(|v| v.is_finite())
                    .fold(0.0f64, |a, v| a.max(v.abs()));
                let candidates = [
                    m.cosine
                        .filter(|c| c.is_finite())
                        .map(|c| ((2.0 * (1.0 - c).max(0.0)).sqrt(), Metric::Cosine)),
                    m.max_abs_err
                        .filter(|e| e.is_finite())
                        .map(|e| (rel(e, scale), Metric::MaxAbsErr)),
                ];
                for (err, metric) in candidates.into_iter().flatten() {
                    if worst.is_none_or(|w| err > w.err) {
                        worst = Some(Deviation { err, metric });
                    }
                }
            }
            worst
        }
    }
}

/// Two scalar argument values are the same (numbers compared as numbers).
fn same_value(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim(), b.trim());
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
        _ => a.eq_ignore_ascii_case(b),
    }
}

/// The entries of one role, in order.
fn of_role(entries: &[Entry], role: Role) -> impl Iterator<Item = &Entry> {
    entries.iter().filter(move |e| e.role == role)
}

fn same_stats(a: &Stats, b: &Stats) -> bool {
    a.all()
        .iter()
        .zip(b.all().iter())
        .all(|(x, y)| matches!((x, y), (Some(x), Some(y)) if x.to_bits() == y.to_bits()))
}

/// If input `e` of API node `node` is a layer weight, its name: by the API's signature, or
/// because it is one of the enclosing module's parameters (same statistics: a matmul with a
/// parameter, a framework's own op).
fn weight_name<'a>(node: &Node, api: &str, parent: Option<&'a Node>, e: &Entry) -> Option<&'a str> {
    if node.node_type != 1 || e.kind != Kind::Tensor {
        return None;
    }
    if let Some(w) = api::weight_argument(api, &e.name) {
        return Some(w);
    }
    let parent = parent?;
    of_role(&parent.inputs, Role::Parameter)
        .find(|p| p.stats.norm().is_some() && same_stats(&p.stats, &e.stats))
        .map(|p| p.name.strip_prefix("parameters.").unwrap_or(&p.name))
}

fn worse<'a>(
    current: &mut Option<Level<'a>>,
    candidate: Level<'a>,
    by: impl Fn(&Tolerance) -> f64,
) {
    let ratio = |l: &Level| {
        let t = by(&l.tolerance);
        if l.err == 0.0 {
            0.0
        } else if t > 0.0 {
            l.err / t
        } else {
            f64::INFINITY
        }
    };
    let replace = match current {
        None => true,
        Some(c) => {
            let (a, b) = (ratio(&candidate), ratio(c));
            a > b || (a == b && candidate.err > c.err)
        }
    };
    if replace {
        *current = Some(candidate);
    }
}

/// Judges target node `n` against golden node `b`; `parent` is `n`'s parent (for weights).
/// `floor` is the precision floor of the run up to this node ([`precision_floor`]): a float
/// comparison tolerates at least its noise, whatever the entry's own dtype.
pub fn judge<'a>(
    mode: Mode,
    opts: &Options,
    n: &'a Node,
    parent: Option<&'a Node>,
    b: &'a Node,
    floor: DtypeClass,
) -> Judgement<'a> {
    let mut input: Option<Level<'a>> = None;
    let mut output: Option<Level<'a>> = None;
    let mut causes = Vec::new();
    let mut has_inputs = false;
    let level = |ne: &'a Entry, be: &'a Entry| -> Option<Level<'a>> {
        let d = deviation(mode, ne, be)?;
        let dtype = ne.dtype.coarser(be.dtype);
        let noise = if dtype == DtypeClass::Exact {
            dtype
        } else {
            dtype.coarser(floor)
        };
        Some(Level {
            entry: Cow::Borrowed(&ne.name),
            err: d.err,
            metric: d.metric,
            tolerance: opts.tolerance(noise, noise),
            dtype,
        })
    };
    let api = if n.node_type == 1 {
        api::api_name(&n.name).unwrap_or("")
    } else {
        ""
    };
    for (ne, be) in of_role(&n.inputs, Role::Input).zip(of_role(&b.inputs, Role::Input)) {
        match ne.kind {
            Kind::Tensor => {
                has_inputs = true;
                let Some(l) = level(ne, be) else { continue };
                if let Some(w) = weight_name(n, api, parent, ne) {
                    if !l.agrees() {
                        causes.push(Cause::Parameter {
                            name: Cow::Borrowed(w),
                            level: l,
                        });
                    }
                } else {
                    worse(&mut input, l, |t| t.agree);
                }
            }
            Kind::Scalar => {
                has_inputs = true;
                if let (Some(x), Some(y), Kind::Scalar) = (&ne.value, &be.value, be.kind) {
                    if !same_value(x, y) {
                        causes.push(Cause::Argument {
                            name: Cow::Borrowed(api::argument_name(api, &ne.name)),
                            target: Cow::Borrowed(x),
                            golden: Cow::Borrowed(y),
                        });
                    }
                }
            }
            Kind::Ignored => {}
        }
    }
    for (ne, be) in of_role(&n.inputs, Role::Parameter).zip(of_role(&b.inputs, Role::Parameter)) {
        has_inputs = true;
        if let Some(l) = level(ne, be) {
            if !l.agrees() {
                let name = ne.name.strip_prefix("parameters.").unwrap_or(&ne.name);
                causes.push(Cause::Parameter {
                    name: Cow::Borrowed(name),
                    level: l,
                });
            }
        }
    }
    for (ne, be) in of_role(&n.outputs, Role::Output).zip(of_role(&b.outputs, Role::Output)) {
        if let Some(l) = level(ne, be) {
            worse(&mut output, l, |t| t.jump);
        }
    }
    Judgement {
        input,
        output,
        causes,
        has_inputs,
    }
}

/// The coarsest float class among the tensors of a node (both sides): what it computed in.
/// `Exact` when it has no float tensor.
pub fn node_precision(n: &Node, b: Option<&Node>) -> DtypeClass {
    let entries = n.inputs.iter().chain(&n.outputs).chain(
        b.into_iter()
            .flat_map(|b| b.inputs.iter().chain(&b.outputs)),
    );
    entries
        .filter(|e| e.kind == Kind::Tensor && e.dtype != DtypeClass::Exact)
        .map(|e| e.dtype)
        .max()
        .unwrap_or(DtypeClass::Exact)
}

/// The precision floor of each node: the coarsest float class computed so far, in execution
/// order (`order`), from the per-node classes `precision`. A run that computes anything in a
/// lower precision carries that precision's rounding into everything after it, float32 tensors
/// included: under bfloat16 autocast, LayerNorm, softmax and the residual stream are float32
/// but hold bfloat16 noise. Backward nodes come after the whole forward in execution order.
pub fn precision_floor(order: &[u32], precision: &[DtypeClass]) -> Vec<DtypeClass> {
    let mut floor = vec![DtypeClass::Exact; precision.len()];
    let mut so_far = DtypeClass::Exact;
    for &i in order {
        so_far = so_far.coarser(precision[i as usize]);
        floor[i as usize] = so_far;
    }
    floor
}

/// Whether any tensor of `entries` (of the given roles) has an inf/NaN statistic.
pub fn has_non_finite(entries: &[Entry], roles: &[Role]) -> bool {
    entries
        .iter()
        .any(|e| e.kind == Kind::Tensor && roles.contains(&e.role) && e.stats.has_non_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(max: f64, min: f64, mean: f64, norm: f64) -> Entry {
        Entry {
            name: "output.0".into(),
            role: Role::Output,
            kind: Kind::Tensor,
            dtype: DtypeClass::Float32,
            stats: Stats::new(Some(max), Some(min), Some(mean), Some(norm)),
            value: None,
            md5: None,
            metrics: None,
            shape: crate::entry::shape_hash("[2]"),
            torch_dtype: true,
        }
    }

    #[test]
    fn a_mean_near_zero_is_measured_against_the_tensor_scale() {
        // A LayerNorm output: mean 1e-8 against 3e-8 is a 200% relative error but nothing
        // against values of size 3.
        let a = tensor(3.0, -3.0, 1e-8, 20.0);
        let b = tensor(3.0, -3.0, 3e-8, 20.0);
        let d = deviation(Mode::Statistics, &a, &b).unwrap();
        assert!(d.err < 1e-7, "{d:?}");
    }

    #[test]
    fn norm_differences_are_relative_to_the_golden_norm() {
        let a = tensor(3.0, -3.0, 0.0, 21.0);
        let b = tensor(3.0, -3.0, 0.0, 20.0);
        let d = deviation(Mode::Statistics, &a, &b).unwrap();
        assert_eq!(d.metric, Metric::Norm);
        assert!((d.err - 0.05).abs() < 1e-12);
    }

    #[test]
    fn inf_on_one_side_only_is_an_infinite_error_and_on_both_agrees() {
        let a = tensor(f64::INFINITY, 0.0, 1.0, f64::INFINITY);
        let b = tensor(3.0, 0.0, 1.0, 5.0);
        assert_eq!(
            deviation(Mode::Statistics, &a, &b).unwrap().metric,
            Metric::NonFinite
        );
        let d = deviation(Mode::Statistics, &a, &a).unwrap();
        assert_eq!(d.err, 0.0);
    }

    #[test]
    fn scalar_values_compare_as_numbers() {
        assert!(same_value("1e-05", "0.00001"));
        assert!(!same_value("1e-05", "0.1"));
        assert!(same_value("True", "true"));
    }

    #[test]
    fn the_precision_floor_is_the_coarsest_float_class_so_far_in_execution_order() {
        use DtypeClass::*;
        // Node 2 runs first (float32), then a bfloat16 linear (0), then a float32 LayerNorm (1)
        // on its bfloat16-rounded output, then an integer-only node (3).
        let precision = [BFloat16, Float32, Float32, Exact];
        let floor = precision_floor(&[2, 0, 1, 3], &precision);
        assert_eq!(floor, [BFloat16, BFloat16, Float32, BFloat16]);
    }

    #[test]
    fn a_float32_node_after_bfloat16_work_tolerates_bfloat16_noise() {
        // 3% apart: beyond float32's jump, within bfloat16's agree tolerance.
        let mut n = crate::load::tests_support::node("Functional.layer_norm.0.forward");
        let mut b = n.clone();
        let mut input = tensor(3.0, -3.0, 0.0, 20.0);
        input.name = "input.0".into();
        input.role = Role::Input;
        n.inputs = vec![input.clone()];
        b.inputs = vec![input];
        n.outputs = vec![tensor(3.0, -3.0, 0.0, 20.6)];
        b.outputs = vec![tensor(3.0, -3.0, 0.0, 20.0)];
        let opts = Options::default();
        let strict = judge(Mode::Statistics, &opts, &n, None, &b, DtypeClass::Float32);
        assert!(strict.output_jumps(opts.jump_ratio));
        let noisy = judge(Mode::Statistics, &opts, &n, None, &b, DtypeClass::BFloat16);
        assert!(!noisy.output_differs());
    }
}
