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
use rayon::prelude::*;

use crate::load::{Mode, NodeRef, RankData};
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
    /// The smallest relative error of the whole tensor, `‖Δ‖₂ / ‖golden‖₂`, that the measured
    /// differences imply: a Norm or Mean difference as measured, an extreme's (Max, Min,
    /// MaxAbsErr) divided by the tensor's dynamic range `Norm / max(|Max|, |Min|)`, since one
    /// element that moved by `δ` moves the whole tensor by at least `δ` (`‖Δ‖₂ ≥ ‖Δ‖∞`). Equal to
    /// `err` when nothing bounds it tighter (md5, inf/NaN, no Norm).
    pub tensor_err: f64,
}

/// The worst entry of a group, with the tolerance of its dtypes.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Level<'a> {
    pub entry: Cow<'a, str>,
    pub err: f64,
    pub metric: Metric,
    /// The worst whole-tensor error of the group ([`Deviation::tensor_err`]), over all its
    /// entries (not only `entry`).
    pub tensor_err: f64,
    pub tolerance: Tolerance,
    pub dtype: DtypeClass,
    /// The class of noise it is judged against: the coarser of `dtype` and the run's precision
    /// floor (`dtype` itself when exact).
    pub noise: DtypeClass,
    /// Its tolerance was learned for the node's op kind ([`crate::tolerance`]), not taken from
    /// the dtype table.
    pub learned: bool,
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
        /// The statistic that is inf/NaN on one side, when that is how it differs.
        #[serde(skip_serializing_if = "Option::is_none")]
        non_finite: Option<NonFiniteStat>,
    },
    /// A non-tensor argument (`eps`, a dropout `p`).
    Argument {
        name: Cow<'a, str>,
        target: Cow<'a, str>,
        golden: Cow<'a, str>,
    },
}

/// A statistic of a tensor that is inf or NaN on one side only.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct NonFiniteStat {
    pub metric: Metric,
    /// `inf`, `-inf` or `NaN`.
    pub value: &'static str,
    /// On the golden side (the target's is finite).
    pub golden: bool,
}

/// The first inf/NaN statistic of `n` (target) or else of `b` (golden), Norm first (it
/// overflows before Max or Min do).
pub fn non_finite_stat(n: &Stats, b: &Stats) -> Option<NonFiniteStat> {
    let first = |s: &Stats| {
        [
            (s.norm(), Metric::Norm),
            (s.max(), Metric::Max),
            (s.min(), Metric::Min),
            (s.mean(), Metric::Mean),
        ]
        .into_iter()
        .find_map(|(v, metric)| {
            let v = v?;
            let value = if v.is_nan() {
                "NaN"
            } else if v == f64::INFINITY {
                "inf"
            } else if v == f64::NEG_INFINITY {
                "-inf"
            } else {
                return None;
            };
            Some((metric, value))
        })
    };
    match (first(n), first(b)) {
        (Some((metric, value)), _) => Some(NonFiniteStat {
            metric,
            value,
            golden: false,
        }),
        (None, Some((metric, value))) => Some(NonFiniteStat {
            metric,
            value,
            golden: true,
        }),
        (None, None) => None,
    }
}

impl Cause<'_> {
    pub fn into_owned(self) -> Cause<'static> {
        let own = |c: Cow<'_, str>| Cow::Owned(c.into_owned());
        match self {
            Cause::Parameter {
                name,
                level,
                non_finite,
            } => Cause::Parameter {
                name: own(name),
                level: level.into_owned(),
                non_finite,
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
    /// The activation inputs differ by more than one unit of their noise class (the coarser
    /// of their dtype and the run's precision floor): they carry an error from upstream, not
    /// rounding alone. Then the outputs are judged by their whole-tensor error
    /// ([`Judgement::output_jumps`]).
    pub inputs_carry_error: bool,
    /// Some weight differs from golden's at all (within the noise or not).
    pub weights_differ: bool,
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
    ///
    /// When the activation inputs differ from golden's by rounding at most, any statistic of
    /// an output counts at face value: rounding is spread over all elements, independently,
    /// and moves an extreme no more than the rest. When they carry an error from upstream
    /// ([`Judgement::inputs_carry_error`]), an output counts by its whole-tensor error
    /// ([`Deviation::tensor_err`]): a structured input error can be concentrated by the op (a
    /// matmul sums it along a weight's direction, a softmax exponentiates a shifted logit), and
    /// a tensor's extremes are single elements, which then move many times more than the tensor
    /// as a whole. An extreme's jump is evidence of a new error only as far as it implies a
    /// whole-tensor error above the jump tolerance (docs/diagnosis.md, §3).
    pub fn output_jumps(&self, ratio: f64) -> bool {
        let input = self.input_err();
        self.output.as_ref().is_some_and(|l| {
            let out = if self.inputs_carry_error {
                l.tensor_err
            } else {
                l.err
            };
            out > l.tolerance.jump && out > ratio * input
        })
    }

    /// With agreeing inputs, whether the output's error is introduced here. Against the dtype
    /// table, which knows nothing of the op: above the jump tolerance and `opts.jump_ratio` times
    /// worse than the inputs ([`Judgement::output_jumps`]). Against a tolerance learned for the
    /// node's op kind ([`crate::tolerance`]), which is the op's own noise: what the output adds to
    /// its inputs' error (relative errors add through an op, to first order) is above it.
    pub fn introduces_error(&self, opts: &Options) -> bool {
        match &self.output {
            Some(l) if l.learned => {
                let out = if self.inputs_carry_error {
                    l.tensor_err
                } else {
                    l.err
                };
                out - self.input_err() > l.tolerance.jump
            }
            _ => self.output_jumps(opts.jump_ratio),
        }
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
    // An element's move of `δ·scale` is a whole-tensor error of at least `δ / range`.
    let range = dynamic_range(b.norm(), scale);
    let mut worst: Option<Deviation> = None;
    let mut tensor_err = 0.0f64;
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
                    tensor_err: f64::INFINITY,
                });
            }
        } else if metric == Metric::Norm {
            rel((x - y).abs(), y.abs())
        } else {
            rel((x - y).abs(), scale)
        };
        let whole = match metric {
            Metric::Max | Metric::Min => err / range,
            _ => err,
        };
        tensor_err = tensor_err.max(whole);
        if worst.is_none_or(|w| err > w.err) {
            worst = Some(Deviation {
                err,
                metric,
                tensor_err: 0.0,
            });
        }
    }
    worst.map(|w| Deviation { tensor_err, ..w })
}

/// A tensor's dynamic range `‖x‖₂ / max|x|`, from its golden Norm and the scale of both sides:
/// between 1 (one element holds all of it) and `√N` (all elements alike). 1 when the Norm is
/// unknown, so that an extreme then counts at face value.
fn dynamic_range(norm: Option<f64>, scale: f64) -> f64 {
    match norm {
        Some(n) if n.is_finite() && scale > 0.0 => (n.abs() / scale).max(1.0),
        _ => 1.0,
    }
}

/// How far target entry `n` is from golden entry `b` in `mode` (`None`: not comparable).
pub fn deviation(mode: Mode, n: &Entry, b: &Entry) -> Option<Deviation> {
    if n.kind() != Kind::Tensor || b.kind() != Kind::Tensor {
        return None;
    }
    // Different shapes hold different things (a framework's reshaped view, another layout):
    // their numbers say nothing about each other.
    if n.shape() != 0 && b.shape() != 0 && n.shape() != b.shape() {
        return None;
    }
    match mode {
        Mode::Md5 => {
            let (x, y) = (n.md5()?, b.md5()?);
            let err = if x == y { 0.0 } else { f64::INFINITY };
            Some(Deviation {
                err,
                metric: Metric::Md5,
                tensor_err: err,
            })
        }
        Mode::Statistics => stats_deviation(&n.stats, &b.stats),
        Mode::Tensor => {
            let mut worst = stats_deviation(&n.stats, &b.stats);
            if let Some(m) = n.metrics() {
                let scale = [n.stats.max(), n.stats.min()]
                    .into_iter()
                    .flatten()
                    .filter(|v| v.is_finite())
                    .fold(0.0f64, |a, v| a.max(v.abs()));
                let range = dynamic_range(b.stats.norm(), scale);
                let candidates = [
                    m.cosine.filter(|c| c.is_finite()).map(|c| {
                        let d = (2.0 * (1.0 - c).max(0.0)).sqrt();
                        (d, d, Metric::Cosine)
                    }),
                    m.max_abs_err.filter(|e| e.is_finite()).map(|e| {
                        let err = rel(e, scale);
                        (err, err / range, Metric::MaxAbsErr)
                    }),
                ];
                for (err, whole, metric) in candidates.into_iter().flatten() {
                    let tensor_err = worst.map_or(whole, |w| w.tensor_err.max(whole));
                    worst = Some(match worst {
                        Some(w) if err <= w.err => Deviation { tensor_err, ..w },
                        _ => Deviation {
                            err,
                            metric,
                            tensor_err,
                        },
                    });
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
    entries.iter().filter(move |e| e.role() == role)
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
pub fn weight_name<'a>(
    node: NodeRef<'_>,
    api: &str,
    parent: Option<NodeRef<'a>>,
    e: &Entry,
) -> Option<&'a str> {
    if node.node_type != 1 || e.kind() != Kind::Tensor {
        return None;
    }
    if let Some(w) = api::weight_argument(api, e.name()) {
        return Some(w);
    }
    let parent = parent?;
    of_role(parent.inputs(), Role::Parameter)
        .find(|p| p.stats.norm().is_some() && same_stats(&p.stats, &e.stats))
        .map(|p| p.name().strip_prefix("parameters.").unwrap_or(p.name()))
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
    let (replace, tensor_err) = match current {
        None => (true, candidate.tensor_err),
        Some(c) => {
            let (a, b) = (ratio(&candidate), ratio(c));
            (
                a > b || (a == b && candidate.err > c.err),
                c.tensor_err.max(candidate.tensor_err),
            )
        }
    };
    if replace {
        *current = Some(candidate);
    }
    if let Some(c) = current {
        c.tensor_err = tensor_err;
    }
}

/// Judges target node `n` against golden node `b`; `parent` is `n`'s parent (for weights).
/// `floor` is the precision floor of the run up to this node ([`precision_floor`]): a float
/// comparison tolerates at least its noise, whatever the entry's own dtype.
pub fn judge<'a>(
    mode: Mode,
    opts: &Options,
    n: NodeRef<'a>,
    parent: Option<NodeRef<'a>>,
    b: NodeRef<'a>,
    floor: DtypeClass,
) -> Judgement<'a> {
    let mut input: Option<Level<'a>> = None;
    let mut output: Option<Level<'a>> = None;
    let mut causes = Vec::new();
    let mut has_inputs = false;
    let mut weights_differ = false;
    let learned_for = |noise: DtypeClass| {
        let learned = opts.learned.as_deref()?;
        learned.get(crate::tolerance::op_kind(n), n.direction, noise)
    };
    // The tolerance of an entry of `role`: learned for the node's op kind (outputs, activation
    // inputs) or the dtype table's.
    let level = |ne: &'a Entry, be: &'a Entry, role: Role| -> Option<Level<'a>> {
        let d = deviation(mode, ne, be)?;
        let dtype = ne.dtype().coarser(be.dtype());
        let noise = if dtype == DtypeClass::Exact {
            dtype
        } else {
            dtype.coarser(floor)
        };
        let table = opts.tolerance(noise, noise);
        let learned = match role {
            Role::Output => learned_for(noise).map(|l| l.output),
            Role::Input => learned_for(noise).map(|l| Tolerance {
                agree: l.input_agree,
                jump: table.jump,
            }),
            Role::Parameter => None,
        };
        Some(Level {
            entry: Cow::Borrowed(ne.name()),
            err: d.err,
            metric: d.metric,
            tensor_err: d.tensor_err,
            tolerance: learned.unwrap_or(table),
            dtype,
            noise,
            learned: learned.is_some(),
        })
    };
    let api = if n.node_type == 1 {
        api::api_name(n.name()).unwrap_or("")
    } else {
        ""
    };
    for (ne, be) in of_role(n.inputs(), Role::Input).zip(of_role(b.inputs(), Role::Input)) {
        match ne.kind() {
            Kind::Tensor => {
                has_inputs = true;
                let weight = weight_name(n, api, parent, ne);
                let role = if weight.is_some() {
                    Role::Parameter
                } else {
                    Role::Input
                };
                let Some(l) = level(ne, be, role) else {
                    continue;
                };
                if let Some(w) = weight {
                    weights_differ |= l.err > 0.0;
                    if !l.agrees() {
                        causes.push(Cause::Parameter {
                            name: Cow::Borrowed(w),
                            non_finite: non_finite_of(&l, ne, be),
                            level: l,
                        });
                    }
                } else {
                    worse(&mut input, l, |t| t.agree);
                }
            }
            Kind::Scalar => {
                has_inputs = true;
                if let (Some(x), Some(y), Kind::Scalar) = (ne.value(), be.value(), be.kind()) {
                    if !same_value(x, y) {
                        causes.push(Cause::Argument {
                            name: Cow::Borrowed(api::argument_name(api, ne.name())),
                            target: Cow::Borrowed(x),
                            golden: Cow::Borrowed(y),
                        });
                    }
                }
            }
            Kind::Ignored => {}
        }
    }
    for (ne, be) in of_role(n.inputs(), Role::Parameter).zip(of_role(b.inputs(), Role::Parameter)) {
        has_inputs = true;
        if let Some(l) = level(ne, be, Role::Parameter) {
            weights_differ |= l.err > 0.0;
            if !l.agrees() {
                let name = ne.name().strip_prefix("parameters.").unwrap_or(ne.name());
                causes.push(Cause::Parameter {
                    name: Cow::Borrowed(name),
                    non_finite: non_finite_of(&l, ne, be),
                    level: l,
                });
            }
        }
    }
    for (ne, be) in of_role(n.outputs(), Role::Output).zip(of_role(b.outputs(), Role::Output)) {
        if let Some(l) = level(ne, be, Role::Output) {
            worse(&mut output, l, |t| t.jump);
        }
    }
    let inputs_carry_error = input
        .as_ref()
        .is_some_and(|l| l.err > l.dtype.coarser(floor).epsilon());
    Judgement {
        input,
        output,
        causes,
        has_inputs,
        inputs_carry_error,
        weights_differ,
    }
}

/// The judge of one rank's target nodes: what [`judge`] needs besides the two nodes (the mode,
/// the options, each node's precision floor), so that a node's judgement is made when it is
/// asked for and not kept. A judgement is a few hundred bytes and a pure function of the loaded
/// graphs: a 1M-node rank held all of them at once (about 190 MB), while the ranking reads most
/// nodes only for a few flags ([`crate::diagnose`] keeps those) and the full judgement of its
/// sources alone.
pub(crate) struct Judge<'a> {
    mode: Mode,
    opts: &'a Options,
    data: &'a RankData,
    floor: Vec<DtypeClass>,
}

impl<'a> Judge<'a> {
    /// The judge of `data`'s target nodes, whose execution order is `order`.
    pub(crate) fn new(
        mode: Mode,
        opts: &'a Options,
        data: &'a RankData,
        order: &[u32],
    ) -> Judge<'a> {
        let precision: Vec<DtypeClass> = (0..data.npu.nodes.len() as u32)
            .into_par_iter()
            .map(|i| {
                let b = data.partner(i).map(|p| data.bench.node(p));
                node_precision(data.npu.node(i), b)
            })
            .collect();
        let floor = precision_floor(order, &precision);
        Judge {
            mode,
            opts,
            data,
            floor,
        }
    }

    /// The judge of `data` in its execution order.
    pub(crate) fn of_rank(mode: Mode, opts: &'a Options, data: &'a RankData) -> Judge<'a> {
        Judge::new(mode, opts, data, &data.npu.execution_order())
    }

    /// The rank it judges.
    pub(crate) fn data(&self) -> &'a RankData {
        self.data
    }

    /// The number of target nodes.
    pub(crate) fn len(&self) -> usize {
        self.floor.len()
    }

    /// The judgement of target node `i` (`None`: unmatched, or a parameter gradient).
    pub(crate) fn node(&self, i: u32) -> Option<Judgement<'a>> {
        let data = self.data;
        let n = data.npu.node(i);
        if n.param_grad {
            return None;
        }
        let b = data.bench.node(data.partner(i)?);
        let parent = n.parent.map(|p| data.npu.node(p));
        Some(judge(
            self.mode,
            self.opts,
            n,
            parent,
            b,
            self.floor[i as usize],
        ))
    }

    /// `what` of every target node's judgement (`None`: not judged), judged on every core, in
    /// node order.
    pub(crate) fn map_all<T: Send>(
        &self,
        what: impl Fn(u32, Option<Judgement<'a>>) -> T + Sync + Send,
    ) -> Vec<T> {
        (0..self.len() as u32)
            .into_par_iter()
            .map(|i| what(i, self.node(i)))
            .collect()
    }
}

/// Which statistic makes `l` an inf/NaN difference, if it is one.
fn non_finite_of(l: &Level<'_>, ne: &Entry, be: &Entry) -> Option<NonFiniteStat> {
    (l.metric == Metric::NonFinite)
        .then(|| non_finite_stat(&ne.stats, &be.stats))
        .flatten()
}

/// The coarsest float class among the tensors of a node (both sides): what it computed in.
/// `Exact` when it has no float tensor.
pub fn node_precision(n: NodeRef<'_>, b: Option<NodeRef<'_>>) -> DtypeClass {
    let entries = n.inputs().iter().chain(n.outputs()).chain(
        b.into_iter()
            .flat_map(|b| b.inputs().iter().chain(b.outputs())),
    );
    entries
        .filter(|e| e.kind() == Kind::Tensor && e.dtype() != DtypeClass::Exact)
        .map(|e| e.dtype())
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
        .any(|e| e.kind() == Kind::Tensor && roles.contains(&e.role()) && e.stats.has_non_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(max: f64, min: f64, mean: f64, norm: f64) -> Entry {
        Entry::new(
            "output.0",
            Role::Output,
            Kind::Tensor,
            DtypeClass::Float32,
            true,
            Stats::new(Some(max), Some(min), Some(mean), Some(norm)),
            crate::entry::shape_hash("[2]"),
            Default::default(),
        )
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
        let name = "Functional.layer_norm.0.forward";
        let node = crate::load::tests_support::node;
        let output = tensor(3.0, -3.0, 0.0, 20.0);
        let input = Entry::new(
            "input.0",
            Role::Input,
            output.kind(),
            output.dtype(),
            output.torch_dtype(),
            output.stats,
            output.shape(),
            Default::default(),
        );
        let side = |output: Entry| {
            let mut side = crate::load::SideGraph::default();
            side.push(name, node(), [input.clone(), output], 1)
                .expect("small");
            side
        };
        let n = side(tensor(3.0, -3.0, 0.0, 20.6));
        let b = side(tensor(3.0, -3.0, 0.0, 20.0));
        let (n, b) = (n.node(0), b.node(0));
        let opts = Options::default();
        let strict = judge(Mode::Statistics, &opts, n, None, b, DtypeClass::Float32);
        assert!(strict.output_jumps(opts.jump_ratio));
        let noisy = judge(Mode::Statistics, &opts, n, None, b, DtypeClass::BFloat16);
        assert!(!noisy.output_differs());
    }
}
