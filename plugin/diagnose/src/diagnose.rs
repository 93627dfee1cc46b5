//! From per-node judgements to the answer: which step, which rank, which nodes.
//!
//! 1. Per rank, every matched target node is judged ([`crate::judge`]) in execution order
//!    (the hierarchy walked in post-order: what a module calls runs before the module ends).
//! 2. A node is a *source* when a weight or argument differs (and its output with it), when its
//!    inputs agree and its outputs jump above the noise, or when its outputs are far worse
//!    than its already differing inputs (a second fault downstream of a first).
//! 3. A backward node whose forward twin already differs inherits from it (its saved tensors
//!    differ); a communication op whose peer's inputs differ inherits from that rank.
//! 4. Sources are grouped: a module that is a source because of what it calls joins the group
//!    of the innermost source inside it, which leads. Forward groups come first, then backward.
//! 5. The first step with a source (forward first within it) is the one reported: a fault in one step's backward reaches the next step's forward only through
//!    the weights it updated.

use foldhash::HashMap;
use rayon::prelude::*;

use crate::entry::{Kind, Role};
use crate::error::DiagnoseError;
use crate::group::{self, SourceGroup};
use crate::judge::{self, Cause, Judgement, Level};
pub use crate::load::Direction;
use crate::load::{CompareFile, Mode, RankData};
use crate::options::Options;
use crate::reason::{self, ReasonPart};
use crate::site::{self, RankClass};
pub use crate::source::{Source, SourceKind};
use crate::tolerance::LearnedTolerances;
use crate::unseen::{self, ChangedBeforeRead, Unseen};

/// The first inf/NaN of a rank.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NonFinite {
    pub step: i64,
    pub rank: i64,
    pub node: String,
    pub direction: Direction,
    /// Whether the node is matched with a golden node (an unmatched node can still overflow).
    pub matched: bool,
    /// "inputs are finite; output.0 holds inf/NaN".
    pub reason: String,
    pub reason_parts: Vec<ReasonPart>,
}

/// A communication op whose error came from another rank.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PeerInheritance {
    pub step: i64,
    pub rank: i64,
    pub node: String,
    pub from_rank: i64,
    pub from_node: String,
}

/// Whether a step's forward (or anything) differs beyond noise.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StepCheck {
    pub step: i64,
    pub forward_differs: bool,
    pub any_differs: bool,
}

/// The answer for one file.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Diagnosis {
    pub mode: Mode,
    /// The step reported: the first whose forward differs beyond noise (or the one asked for).
    pub step: i64,
    /// The ranks looked at.
    pub ranks: Vec<i64>,
    /// The steps looked at, in order, until the first that differs.
    pub steps_checked: Vec<StepCheck>,
    /// The rank where the error started: the rank of the first source.
    pub origin_rank: Option<i64>,
    /// The first inf/NaN in execution order, per rank.
    pub first_non_finite: Vec<NonFinite>,
    /// Ranked sources: step by step; in a step forward first in execution order, then
    /// backward, then the update; per pass, rank by rank.
    pub sources: Vec<Source>,
    /// The sources grouped by call site across micro-batches, ranks and steps: one line per
    /// fault, in the order of their first occurrence ([`group`]).
    pub groups: Vec<SourceGroup>,
    pub peer_inheritance: Vec<PeerInheritance>,
    /// Matched target nodes judged.
    pub nodes_judged: usize,
    /// The tolerances learned per op kind that replaced the dtype table (from a reference, or
    /// tightened from the compare's first judged step); every other op kind used the table.
    pub tolerances: Option<LearnedTolerances>,
}

/// Per-rank judgements of one step (what [`crate::map`] reads besides the step's sources): the
/// judge of the rank's nodes and, per node, the flags the ranking reads of every node. A node's
/// whole judgement is made again when asked for ([`RankJudgements::judgement`]: the sources,
/// the map's modules, the CSV's rows), not kept for every node.
pub(crate) struct RankJudgements<'a> {
    pub(crate) data: &'a RankData,
    /// Node indexes in execution order.
    pub(crate) order: Vec<u32>,
    judge: judge::Judge<'a>,
    /// Per target node, [`Flags`] of its judgement.
    flags: Vec<u8>,
    first_non_finite: Option<NonFinite>,
    /// Modules that changed the output of the dumped call that produced it ([`unseen`]).
    unseen: HashMap<u32, Unseen>,
    /// Nodes whose output changed after their record, before a later call read it.
    before_read: HashMap<u32, ChangedBeforeRead>,
}

/// What [`RankJudgements`] keeps of each node's judgement (bits of one byte).
struct Flags;

impl Flags {
    /// Judged: matched, and not a parameter gradient.
    const JUDGED: u8 = 1;
    /// [`Judgement::differs`].
    const DIFFERS: u8 = 2;
    /// [`Judgement::inputs_agree`].
    const INPUTS_AGREE: u8 = 4;
    /// What [`step_check`] counts as a difference of the step.
    const STEP_DIFFERS: u8 = 8;
    /// [`source_kind`] makes it a source of some kind.
    const SOURCE_KIND: u8 = 16;
}

impl<'a> RankJudgements<'a> {
    /// The judgement of target node `i` (`None`: unmatched, or a parameter gradient).
    pub(crate) fn judgement(&self, i: u32) -> Option<Judgement<'a>> {
        self.judge.node(i)
    }

    fn flag(&self, i: u32, flag: u8) -> bool {
        self.flags[i as usize] & flag != 0
    }

    /// The number of target nodes judged.
    fn nodes_judged(&self) -> usize {
        self.flags
            .iter()
            .filter(|&&f| f & Flags::JUDGED != 0)
            .count()
    }
}

fn judge_rank<'a>(mode: Mode, opts: &'a Options, data: &'a RankData) -> RankJudgements<'a> {
    let order = data.npu.execution_order();
    let judge = judge::Judge::new(mode, opts, data, &order);
    let causes_only = mode == Mode::Md5 && data.cross_framework();
    let flags = judge.map_all(|_, j| {
        let Some(j) = j else { return 0 };
        let mut f = Flags::JUDGED;
        if j.differs() {
            f |= Flags::DIFFERS;
        }
        if j.inputs_agree() {
            f |= Flags::INPUTS_AGREE;
        }
        if j.output_jumps(0.0) || !j.causes.is_empty() && j.output_differs() {
            f |= Flags::STEP_DIFFERS;
        }
        if source_kind(&j, opts, causes_only).is_some() {
            f |= Flags::SOURCE_KIND;
        }
        f
    });
    let first_non_finite = first_non_finite(data, &order);
    let unseen: HashMap<u32, Unseen> = if causes_only {
        HashMap::default()
    } else {
        (0..data.npu.nodes.len() as u32)
            .into_par_iter()
            .filter(|&i| {
                flags[i as usize] & Flags::JUDGED != 0 && data.npu.nodes[i as usize].node_type == 0
            })
            .filter_map(|i| Some((i, unseen::unseen(&judge, mode, opts, i)?)))
            .collect()
    };
    let before_read = if causes_only {
        HashMap::default()
    } else {
        unseen::changed_before_read(&judge, mode, opts, &order)
    };
    let mut flags = flags;
    for &i in unseen.keys().chain(before_read.keys()) {
        flags[i as usize] |= Flags::SOURCE_KIND | Flags::STEP_DIFFERS;
    }
    RankJudgements {
        data,
        order,
        judge,
        flags,
        first_non_finite,
        unseen,
        before_read,
    }
}

/// For each target node of one rank, whether its outputs differ from golden beyond the noise,
/// judged as [`diagnose_step`] judges that rank alone (same precision floor, same tolerances,
/// tightened from this rank's nodes); `false` for unmatched nodes and parameter gradients. The
/// service colours the nodes of a view with it.
pub fn differing_nodes(mode: Mode, opts: &Options, data: &RankData) -> Vec<bool> {
    let opts = step_options(mode, opts, std::slice::from_ref(data));
    let r = judge_rank(mode, &opts, data);
    (0..data.npu.nodes.len() as u32)
        .map(|i| r.flag(i, Flags::DIFFERS))
        .collect()
}

/// For each target node of one rank, how many of the `sources` (target node names; a name
/// listed twice counts once, an unknown one not at all) lie inside it, at any depth, the node
/// itself not counted: the colour mode marks a module holding a source even when its own output
/// agrees. Computed once from the hierarchy, children before their module (the execution
/// order's post-order walk, iterative: a deep or corrupt hierarchy cannot overflow the stack).
pub fn sources_inside<'a>(data: &RankData, sources: impl IntoIterator<Item = &'a str>) -> Vec<u32> {
    let graph = &data.npu;
    let mut is_source = vec![false; graph.nodes.len()];
    for name in sources {
        if let Some(i) = graph.find(name) {
            is_source[i as usize] = true;
        }
    }
    let mut inside = vec![0u32; graph.nodes.len()];
    for i in graph.execution_order() {
        let count = graph.nodes[i as usize]
            .children
            .iter()
            .map(|&c| inside[c as usize].saturating_add(u32::from(is_source[c as usize])))
            .fold(0u32, u32::saturating_add);
        inside[i as usize] = count;
    }
    inside
}

/// Whether target node `i` can be a source at all. What an API's backward hook sees differs
/// between frameworks (fused or decomposed gradients, other shapes): across MindSpore and
/// PyTorch only modules' gradients compare.
fn comparable(data: &RankData, i: u32) -> bool {
    let n = data.npu.node(i);
    !(n.node_type == 1 && n.direction == Direction::Backward && data.cross_framework())
}

/// The forward twin of a backward node name.
fn forward_twin(name: &str) -> Option<String> {
    let i = name.rfind("backward")?;
    Some(format!(
        "{}forward{}",
        &name[..i],
        &name[i + "backward".len()..]
    ))
}

/// The kind of source a judgement makes, if any. With `causes_only` (md5 across frameworks,
/// where no two kernels agree bit for bit) only differing weights and arguments count.
fn source_kind(j: &Judgement<'_>, opts: &Options, causes_only: bool) -> Option<SourceKind> {
    if !j.causes.is_empty() && j.output_differs() {
        Some(SourceKind::Cause)
    } else if causes_only {
        None
    } else if j.has_inputs && j.inputs_agree() && j.introduces_error(opts) {
        Some(SourceKind::Introduced)
    } else if !j.inputs_agree() && j.output_jumps(opts.amplify_ratio) {
        Some(SourceKind::Amplified)
    } else {
        None
    }
}

fn step_check(step: i64, ranks: &[RankJudgements<'_>]) -> StepCheck {
    let mut forward_differs = false;
    let mut any_differs = false;
    for r in ranks {
        for i in 0..r.data.npu.nodes.len() as u32 {
            if !r.flag(i, Flags::STEP_DIFFERS) || !comparable(r.data, i) {
                continue;
            }
            any_differs = true;
            if r.data.npu.nodes[i as usize].direction == Direction::Forward {
                forward_differs = true;
            }
        }
        if let Some(nf) = &r.first_non_finite {
            any_differs = true;
            if nf.direction == Direction::Forward {
                forward_differs = true;
            }
        }
    }
    StepCheck {
        step,
        forward_differs,
        any_differs,
    }
}

/// The first node in execution order (so the innermost) whose target outputs hold inf/NaN
/// (a Norm that overflows counts) while its target *activation* inputs do not, and whose golden
/// outputs (if matched) are finite. Weights (a module's parameters, an API's weight argument)
/// are not activations: a weight that holds inf/NaN is named as the cause.
fn first_non_finite(data: &RankData, order: &[u32]) -> Option<NonFinite> {
    for &i in order {
        let n = data.npu.node(i);
        if n.param_grad || !judge::has_non_finite(n.outputs(), &[Role::Output]) {
            continue;
        }
        let parent = n.parent.map(|p| data.npu.node(p));
        let api = if n.node_type == 1 {
            crate::api::api_name(n.name()).unwrap_or("")
        } else {
            ""
        };
        let is_weight = |e: &crate::entry::Entry| {
            e.role() == Role::Parameter || judge::weight_name(n, api, parent, e).is_some()
        };
        let activation_non_finite = n.inputs().iter().any(|e| {
            e.kind() == Kind::Tensor
                && e.role() == Role::Input
                && !is_weight(e)
                && e.stats.has_non_finite()
        });
        if activation_non_finite {
            continue;
        }
        let partner = data.partner(i);
        if let Some(b) = partner {
            if judge::has_non_finite(data.bench.outputs(b), &[Role::Output]) {
                continue;
            }
        }
        let entry = n
            .outputs()
            .iter()
            .find(|e| e.stats.has_non_finite())
            .map(|e| (*e.name()).into());
        let mut parts: Vec<ReasonPart> = n
            .inputs()
            .iter()
            .filter(|e| e.kind() == Kind::Tensor && is_weight(e))
            .filter_map(|e| {
                let stat = judge::non_finite_stat(&e.stats, &crate::entry::Stats::default())?;
                let name = match e.role() {
                    Role::Parameter => e.name().strip_prefix("parameters.").unwrap_or(e.name()),
                    _ => judge::weight_name(n, api, parent, e).unwrap_or(e.name()),
                };
                Some(ReasonPart::ParameterNonFinite {
                    name: name.into(),
                    metric: stat.metric,
                    value: stat.value.into(),
                    golden: false,
                })
            })
            .collect();
        parts.push(ReasonPart::InputsFinite);
        parts.push(ReasonPart::HoldsNonFinite { entry });
        return Some(NonFinite {
            step: data.step,
            rank: data.rank,
            node: n.name().to_string(),
            direction: n.direction,
            matched: partner.is_some(),
            reason: reason::sentence(&parts),
            reason_parts: parts,
        });
    }
    None
}

/// Why `j` makes a source of `kind`, clause by clause ([`ReasonPart`]).
pub(crate) fn reason(mode: Mode, kind: &SourceKind, j: &Judgement<'_>) -> Vec<ReasonPart> {
    let mut parts = Vec::new();
    for c in &j.causes {
        parts.push(match c {
            Cause::Parameter {
                name,
                non_finite: Some(stat),
                ..
            } => ReasonPart::ParameterNonFinite {
                name: (**name).into(),
                metric: stat.metric,
                value: stat.value.into(),
                golden: stat.golden,
            },
            Cause::Parameter { name, level, .. } if mode == Mode::Md5 => {
                ReasonPart::ParameterMd5Differs {
                    name: (**name).into(),
                    entry: (*level.entry).into(),
                }
            }
            Cause::Parameter { name, level, .. } => ReasonPart::ParameterDiffers {
                name: (**name).into(),
                metric: level.metric,
                err: level.err,
            },
            Cause::Argument {
                name,
                target,
                golden,
            } => ReasonPart::ArgumentDiffers {
                name: (**name).into(),
                target: (**target).into(),
                golden: (**golden).into(),
            },
        });
    }
    let entry = |l: &Level<'_>| -> Box<str> { (*l.entry).into() };
    match (&j.input, mode) {
        (None, _) => {}
        (Some(l), Mode::Md5) if l.err == 0.0 => parts.push(ReasonPart::InputsEqualMd5),
        (Some(l), _) if l.err == 0.0 => parts.push(ReasonPart::InputsEqual),
        (Some(l), _) if *kind == SourceKind::Amplified => parts.push(ReasonPart::InputsDiffer {
            entry: entry(l),
            metric: l.metric,
            err: l.err,
        }),
        (Some(l), Mode::Md5) if !l.agrees() => parts.push(ReasonPart::InputsDifferMd5),
        (Some(l), _) if !l.agrees() => parts.push(ReasonPart::InputsAlreadyDiffer {
            entry: entry(l),
            metric: l.metric,
            err: l.err,
        }),
        (Some(l), _) => parts.push(ReasonPart::InputsAgree { err: l.err }),
    }
    if let Some(o) = &j.output {
        parts.push(match mode {
            Mode::Md5 => ReasonPart::OutputMd5Differs { entry: entry(o) },
            _ if o.metric == judge::Metric::NonFinite => {
                ReasonPart::OutputNonFinite { entry: entry(o) }
            }
            _ => ReasonPart::OutputDiffers {
                entry: entry(o),
                metric: o.metric,
                err: o.err,
            },
        });
    }
    if let (Some(score), SourceKind::Amplified) = (j.score(), kind) {
        parts.push(ReasonPart::WorseThanInputs { score });
    }
    parts
}

/// Why module `i` is a source of computation the dump did not see.
fn unseen_reason(data: &RankData, i: u32, u: &Unseen) -> Vec<ReasonPart> {
    let module = data.npu.name(i);
    let call = data.npu.node(u.call);
    let name = unseen::call_label(module, call.name(), call.node_type == 0).into();
    let (entry, metric, err, call_err) = (u.entry.clone(), u.metric, u.err, u.call_err);
    vec![if data.npu.node(i).direction == Direction::Backward {
        ReasonPart::GradientChangedAfterCall {
            name,
            entry,
            metric,
            err,
            call_err,
        }
    } else {
        ReasonPart::OutputChangedAfterCall {
            name,
            entry,
            metric,
            err,
            call_err,
        }
    }]
}

/// Why node `i` is a source of a change after its record, before a later call read it.
fn before_read_reason(data: &RankData, i: u32, c: &ChangedBeforeRead) -> Vec<ReasonPart> {
    let name: Box<str> = data.npu.name(c.reader).into();
    let (entry, metric, err, call_err) = (c.entry.clone(), c.metric, c.err, c.producer_err);
    vec![if data.npu.node(i).direction == Direction::Backward {
        ReasonPart::GradientChangedBeforeCall {
            name,
            entry,
            metric,
            err,
            call_err,
        }
    } else {
        ReasonPart::OutputChangedBeforeCall {
            name,
            entry,
            metric,
            err,
            call_err,
        }
    }]
}

/// Diagnoses one step, already loaded (all ranks of interest).
pub fn diagnose_step(mode: Mode, opts: &Options, ranks: &[RankData]) -> Diagnosis {
    let opts = &step_options(mode, opts, ranks);
    let judged: Vec<RankJudgements<'_>> = ranks.iter().map(|r| judge_rank(mode, opts, r)).collect();
    let step = ranks.first().map_or(0, |r| r.step);
    let check = step_check(step, &judged);
    let mut d = collect(mode, opts, &judged, false);
    d.steps_checked = vec![check];
    d.groups = group::group(&mut d.sources);
    d
}

/// The options one step is judged with: `opts`, or, with `opts.tighten` and no learned
/// tolerances, the dtype table tightened per op kind from the step's own nodes
/// ([`LearnedTolerances::tightened`]), in [`TIGHTEN_PASSES`] passes: each learns only from the
/// nodes whose inputs agree under the tolerances of the pass before, so that the nodes
/// downstream of a fault (whose inputs carry its error) stop counting as noise.
fn step_options<'o>(
    mode: Mode,
    opts: &'o Options,
    ranks: &[RankData],
) -> std::borrow::Cow<'o, Options> {
    // From a reference, the kinds it held too few times are tightened from the compare itself
    // ([`LearnedTolerances::tightened`] keeps the reference's own).
    let from_reference = opts
        .learned
        .as_deref()
        .is_some_and(|l| matches!(l.from, crate::tolerance::LearnedFrom::Reference { .. }));
    if !opts.tighten || opts.learned.is_some() && !from_reference || mode == Mode::Md5 {
        return std::borrow::Cow::Borrowed(opts);
    }
    let mut current = std::borrow::Cow::Borrowed(opts);
    for _ in 0..TIGHTEN_PASSES {
        let Some(t) = LearnedTolerances::tightened(&current, mode, ranks) else {
            break;
        };
        current = std::borrow::Cow::Owned(Options {
            learned: Some(std::sync::Arc::new(t)),
            ..opts.clone()
        });
    }
    current
}

/// Passes of tightening from the compare itself ([`step_options`]).
const TIGHTEN_PASSES: usize = 2;

/// The sources of one step. With `updated` (an earlier step had a source), every weight
/// carries the optimizer's update of that earlier difference: a node whose weights differ is
/// inherited from the update, not a source, unless a non-tensor argument differs too.
fn collect(mode: Mode, opts: &Options, judged: &[RankJudgements<'_>], updated: bool) -> Diagnosis {
    // Which ranks hold the same layers under the same names ([`site::rank_classes`]).
    let signatures: Vec<(i64, u64)> = judged
        .iter()
        .map(|r| (r.data.rank, site::module_signature(&r.data.npu)))
        .collect();
    let p2p = judged.iter().any(|r| site::has_point_to_point(&r.data.npu));
    let classes = site::rank_classes(&signatures, p2p);
    let by_rank: HashMap<i64, usize> = judged
        .iter()
        .enumerate()
        .map(|(k, r)| (r.data.rank, k))
        .collect();
    let mut sources: Vec<(Direction, usize, usize, Source)> = Vec::new();
    let mut peer_inheritance = Vec::new();
    let mut first_nf = Vec::new();
    let mut nodes_judged = 0;
    for (rank_pos, r) in judged.iter().enumerate() {
        let data = r.data;
        let causes_only = mode == Mode::Md5 && data.cross_framework();
        nodes_judged += r.nodes_judged();
        if let Some(nf) = &r.first_non_finite {
            first_nf.push(nf.clone());
        }
        // Groups: ancestor node → index in `sources` of the group its innermost source leads.
        let mut group_of: HashMap<u32, usize> = HashMap::default();
        // Ancestors of a communication op that inherited from a peer → that peer: a module
        // whose output differs only through what it received is not a source either.
        let mut fed_by: HashMap<u32, (i64, String)> = HashMap::default();
        let rank_class: RankClass = classes[rank_pos];
        for (pos, &i) in r.order.iter().enumerate() {
            if !r.flag(i, Flags::SOURCE_KIND) {
                continue;
            }
            let Some(j) = r.judgement(i) else {
                continue;
            };
            let unseen = r.unseen.get(&i);
            let before_read = r.before_read.get(&i);
            let Some(kind) = source_kind(&j, opts, causes_only).or_else(|| {
                (unseen.is_some() || before_read.is_some()).then_some(SourceKind::Introduced)
            }) else {
                continue;
            };
            if updated
                && j.weights_differ
                && !j.causes.iter().any(|c| matches!(c, Cause::Argument { .. }))
            {
                continue;
            }
            let n = data.npu.node(i);
            let direction = n.direction;
            if !comparable(data, i) {
                continue;
            }
            if direction == Direction::Backward {
                let twin_differs = forward_twin(n.name())
                    .and_then(|t| data.npu.find(&t))
                    .is_some_and(|t| r.flag(t, Flags::DIFFERS));
                if twin_differs {
                    continue;
                }
            }
            if kind != SourceKind::Cause {
                if let Some(peer) = bad_peer(n, data.step, judged, &by_rank) {
                    for a in data.npu.ancestors(i) {
                        fed_by.entry(a).or_insert_with(|| peer.clone());
                    }
                    peer_inheritance.push(PeerInheritance {
                        step: data.step,
                        rank: data.rank,
                        node: n.name().to_string(),
                        from_rank: peer.0,
                        from_node: peer.1,
                    });
                    continue;
                }
            }
            if let Some(&g) = group_of.get(&i) {
                sources[g].3.enclosing.push(n.name().to_string());
                continue;
            }
            if kind != SourceKind::Cause {
                if let Some(peer) = fed_by.get(&i) {
                    peer_inheritance.push(PeerInheritance {
                        step: data.step,
                        rank: data.rank,
                        node: n.name().to_string(),
                        from_rank: peer.0,
                        from_node: peer.1.clone(),
                    });
                    continue;
                }
            }
            let parts = match (unseen, before_read) {
                (Some(u), _) if kind != SourceKind::Cause => unseen_reason(data, i, u),
                (None, Some(c)) if kind != SourceKind::Cause => before_read_reason(data, i, c),
                _ => {
                    let mut parts = reason(mode, &kind, &j);
                    if let Some(api) = unseen::kernel_backward(data, i) {
                        parts.push(ReasonPart::KernelBackward {
                            name: data.npu.name(api).into(),
                        });
                    }
                    parts
                }
            };
            let g = sources.len();
            for a in data.npu.ancestors(i) {
                group_of.entry(a).or_insert(g);
            }
            let golden = data
                .partner(i)
                .map(|b| data.bench.name(b).to_string())
                .unwrap_or_default();
            sources.push((
                direction,
                rank_pos,
                pos,
                Source {
                    step: data.step,
                    rank: data.rank,
                    node: n.name().to_string(),
                    golden_node: golden,
                    direction,
                    reason: reason::sentence(&parts),
                    reason_parts: parts,
                    kind,
                    causes: j.causes.iter().cloned().map(Cause::into_owned).collect(),
                    score: j.score(),
                    input: j.input.clone().map(Level::into_owned),
                    output: j.output.clone().map(Level::into_owned),
                    enclosing: Vec::new(),
                    micro_step: n.micro_step,
                    site: site::call_site(&data.npu, i),
                    rank_class,
                    group: 0,
                },
            ));
        }
    }
    sources.sort_by_key(|(dir, rank_pos, pos, _)| (*dir, *rank_pos, *pos));
    let sources: Vec<Source> = sources.into_iter().map(|(_, _, _, s)| s).collect();
    Diagnosis {
        mode,
        step: judged.first().map_or(0, |r| r.data.step),
        ranks: judged.iter().map(|r| r.data.rank).collect(),
        steps_checked: Vec::new(),
        origin_rank: sources
            .first()
            .map(|s| s.rank)
            .or_else(|| first_nf.first().map(|n| n.rank)),
        first_non_finite: first_nf,
        sources,
        groups: Vec::new(),
        peer_inheritance,
        nodes_judged,
        tolerances: opts.learned.as_deref().cloned(),
    }
}

/// For a communication op: a peer (rank, node) whose activation inputs already differ.
fn bad_peer(
    n: crate::load::NodeRef<'_>,
    _step: i64,
    judged: &[RankJudgements<'_>],
    by_rank: &HashMap<i64, usize>,
) -> Option<(i64, String)> {
    if !n.name().starts_with("Distributed.") {
        return None;
    }
    for (rank, node) in &n.peers {
        let Some(&k) = by_rank.get(rank) else {
            continue;
        };
        let r = &judged[k];
        let Some(i) = r.data.npu.find(node) else {
            continue;
        };
        if r.flag(i, Flags::JUDGED) && !r.flag(i, Flags::INPUTS_AGREE) {
            return Some((*rank, node.to_string()));
        }
    }
    None
}

/// Diagnoses a file: every step (or the requested one), every rank (or the requested one).
/// Steps are judged in order; after the first step with a source, weight differences are
/// inherited from the optimizer's update ([`collect`]). The reported `step` is the first with
/// a source or an inf/NaN; without any, the first where anything differs, else the first.
pub fn diagnose(file: &CompareFile, opts: &Options) -> Result<Diagnosis, DiagnoseError> {
    struct Nothing;
    impl StepVisitor for Nothing {
        fn step(&mut self, _: &[RankJudgements<'_>], _: &Diagnosis) {}
    }
    diagnose_visiting(file, opts, &mut Nothing)
}

/// What [`diagnose_visiting`] tells as it goes.
pub(crate) trait StepVisitor {
    /// `read` of the `total` graphs (a step and rank) to judge are read.
    fn graph_read(&mut self, _read: usize, _total: usize) {}
    /// The graph of the rank at `position` among the step's ranks is read (told before
    /// [`StepVisitor::graph_read`], in the order the graphs arrive, before the step is judged).
    fn graph_loaded(&mut self, _position: usize, _data: &RankData) {}
    /// A step is judged: every rank's judgements and the step's own sources and peer inheritance.
    fn step(&mut self, ranks: &[RankJudgements<'_>], step: &Diagnosis);
}

/// A closure over each judged step is a visitor that needs no graph count (the CSV export's).
impl<F: FnMut(&[RankJudgements<'_>], &Diagnosis)> StepVisitor for F {
    fn step(&mut self, ranks: &[RankJudgements<'_>], step: &Diagnosis) {
        self(ranks, step)
    }
}

/// Threads that read a step's graphs at most (each with its own connection to the file).
const MAX_READERS: usize = 4;

/// The graphs of `step`, `ranks` in order, calling `read` after each with its position among
/// `ranks` (and the graph, when it could be read), in the order they arrive. A step of several ranks is
/// read on up to [`MAX_READERS`] threads (no more than the cores), each with its own connection
/// in `readers` (opened on first use, kept for the next steps); one rank is read here.
fn read_step(
    file: &CompareFile,
    readers: &mut Vec<CompareFile>,
    step: i64,
    ranks: &[i64],
    read: &mut dyn FnMut(usize, Option<&RankData>),
) -> Result<Vec<RankData>, DiagnoseError> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_READERS)
        .min(ranks.len());
    if threads <= 1 {
        return ranks
            .iter()
            .enumerate()
            .map(|(k, &rank)| {
                let data = file.load(step, rank);
                read(k, data.as_ref().ok());
                data
            })
            .collect();
    }
    while readers.len() < threads {
        readers.push(CompareFile::open(file.path())?);
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<Option<Result<RankData, DiagnoseError>>> =
        std::iter::repeat_with(|| None).take(ranks.len()).collect();
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        for reader in readers.iter_mut().take(threads) {
            let (tx, next) = (tx.clone(), &next);
            s.spawn(move || loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&rank) = ranks.get(k) else {
                    break;
                };
                if tx.send((k, reader.load(step, rank))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for (k, data) in rx {
            read(k, data.as_ref().ok());
            out[k] = Some(data);
        }
    });
    out.into_iter()
        .zip(ranks)
        .map(|(data, &rank)| {
            data.unwrap_or_else(|| {
                Err(DiagnoseError::Data {
                    path: file.path().to_owned(),
                    what: format!("step {step}, rank {rank}"),
                    reason: "its reader stopped".into(),
                })
            })
        })
        .collect()
}

/// [`diagnose`], handing each step to `visit` once it is judged: every rank's judgements and the
/// step's own sources and peer inheritance (before the file's steps are joined), and telling it
/// each graph read. The divergence map ([`crate::map`]) is built this way, from the same
/// judgements, one step in memory at a time.
pub(crate) fn diagnose_visiting(
    file: &CompareFile,
    opts: &Options,
    visit: &mut dyn StepVisitor,
) -> Result<Diagnosis, DiagnoseError> {
    file.check_selection(opts.step, opts.rank)?;
    let graphs = file.graphs_to_visit(opts.step, opts.rank)?;
    let total: usize = graphs.iter().map(|(_, ranks)| ranks.len()).sum();
    let mut read = 0;
    let mut whole: Option<Diagnosis> = None;
    // Steps with a source or an inf/NaN.
    let mut found_in: Vec<i64> = Vec::new();
    let mut updated = false;
    let mut readers = Vec::new();
    for (step, ranks) in graphs {
        let data = read_step(file, &mut readers, step, &ranks, &mut |position, graph| {
            read += 1;
            if let Some(graph) = graph {
                visit.graph_loaded(position, graph);
            }
            visit.graph_read(read, total);
        })?;
        let step_opts = step_options(file.mode(), opts, &data);
        let mode = file.mode();
        let judged: Vec<RankJudgements<'_>> = data
            .par_iter()
            .map(|r| judge_rank(mode, &step_opts, r))
            .collect();
        let check = step_check(step, &judged);
        let d = collect(file.mode(), &step_opts, &judged, updated);
        visit.step(&judged, &d);
        if !d.sources.is_empty() || !d.first_non_finite.is_empty() {
            found_in.push(step);
        }
        updated |= !d.sources.is_empty();
        whole = Some(match whole {
            None => Diagnosis {
                steps_checked: vec![check],
                ..d
            },
            Some(mut w) => {
                w.steps_checked.push(check);
                // The first inf/NaN of a rank is its earliest.
                for nf in d.first_non_finite {
                    if !w.first_non_finite.iter().any(|x| x.rank == nf.rank) {
                        w.first_non_finite.push(nf);
                    }
                }
                w.sources.extend(d.sources);
                w.peer_inheritance.extend(d.peer_inheritance);
                w.nodes_judged += d.nodes_judged;
                w
            }
        });
    }
    let Some(mut d) = whole else {
        return Err(DiagnoseError::Data {
            path: file.path().to_owned(),
            what: "tb_config.step_list".into(),
            reason: "no step to diagnose".into(),
        });
    };
    d.step = found_in
        .first()
        .copied()
        .or_else(|| {
            d.steps_checked
                .iter()
                .find(|c| c.any_differs)
                .map(|c| c.step)
        })
        .unwrap_or(d.step);
    d.origin_rank = d
        .sources
        .first()
        .map(|s| s.rank)
        .or_else(|| d.first_non_finite.first().map(|n| n.rank));
    d.groups = group::group(&mut d.sources);
    Ok(d)
}
