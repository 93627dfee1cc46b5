//! Tolerances learned from data, per **op kind** (an API such as `Functional.linear`, or a
//! module class such as `Module.Linear`), pass and noise class, instead of one pair of numbers
//! per dtype (docs/diagnosis.md, "Tolerances from data").
//!
//! - From a **reference** ([`LearnedTolerances::from_reference`]): a compare of a fault-free run
//!   at the target's dtype against the golden's dtype on the golden's hardware, made from other
//!   data or seeds. It measures precision noise. Each op kind with at least [`MIN_SAMPLES`]
//!   judged nodes gets the [`QUANTILE`] of its nodes' output errors (the diagnosis's own
//!   scale-relative measure, [`crate::judge::deviation`]) times [`MARGIN`] as its output
//!   tolerance, and the same of its input errors as its inputs' agree tolerance; other kinds
//!   keep the dtype table.
//! - From the **compare itself** ([`LearnedTolerances::tightened`]): the median error of an op
//!   kind's nodes whose inputs agree, times [`TIGHTEN_FACTOR`], where that is *below* the dtype
//!   table; never above it. An operator wrong on every call makes its own median large: the
//!   table stays, so a bug that is everywhere cannot teach the rules that it is normal.
//!
//! A node whose output tolerance is learned is judged against the noise of its own kind, which
//! already holds the noise its inputs bring: its output jumps when it is above that tolerance and
//! worse than its inputs (the fixed `jump_ratio` of the dtype table is for tolerances that know
//! nothing of the op).

use std::path::{Path, PathBuf};

use foldhash::HashMap;

use crate::diagnose;
use crate::entry::DtypeClass;
use crate::error::DiagnoseError;
use crate::judge::Judgement;
use crate::load::{CompareFile, Direction, Mode, Node, RankData};
use crate::options::{Options, Tolerance};

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
pub fn op_kind(n: &Node) -> &str {
    if n.node_type != 0 {
        return crate::site::api_kind(&n.name);
    }
    // <Prefix>.<path…>.<Class>.<forward|backward>.<index>
    let mut parts = n.name.rsplit('.');
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
        &n.name
    } else {
        class
    }
}

/// The samples of one key while learning.
#[derive(Default)]
struct Samples {
    outputs: Vec<f64>,
    inputs: Vec<f64>,
}

type Key = (String, Direction, DtypeClass);

/// The `q` quantile of `v`, linearly interpolated between the order statistics around rank
/// `q (n - 1)` (the usual estimator: the sample's maximum counts only when `n` is small);
/// `v` is sorted in place.
fn quantile(v: &mut [f64], q: f64) -> f64 {
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

/// Adds the errors of one rank's judged nodes to `samples`; `keep` chooses the nodes.
fn gather(
    data: &RankData,
    judged: &[Option<Judgement<'_>>],
    samples: &mut HashMap<Key, Samples>,
    keep: impl Fn(&Judgement<'_>) -> bool,
) {
    for (i, j) in judged.iter().enumerate() {
        let Some(j) = j else { continue };
        let Some(out) = &j.output else { continue };
        if !out.err.is_finite() || out.noise == DtypeClass::Exact || !keep(j) {
            continue;
        }
        let n = &data.npu.nodes[i];
        let s = samples
            .entry((op_kind(n).to_owned(), n.direction, out.noise))
            .or_default();
        s.outputs.push(out.err);
        if let Some(input) = j.input.as_ref().filter(|l| l.err.is_finite()) {
            s.inputs.push(input.err);
        }
    }
}

impl LearnedTolerances {
    fn new(from: LearnedFrom, mut kinds: Vec<Learned>) -> LearnedTolerances {
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

    /// Learns from reference compare `path`, checked against `target` (the file it will judge):
    /// the reference must be a compare with magnitudes (not md5) of the same model.
    pub fn from_reference(
        path: &Path,
        target: &CompareFile,
    ) -> Result<LearnedTolerances, DiagnoseError> {
        let bad = |reason: String| DiagnoseError::Reference {
            path: path.to_owned(),
            reason,
        };
        let reference = CompareFile::open(path).map_err(|e| match e {
            DiagnoseError::NotCompare { reason, .. } => {
                bad(format!("not a compare file: {reason}"))
            }
            other => other,
        })?;
        if reference.mode() == Mode::Md5 {
            return Err(bad(
                "an md5 compare has no magnitudes to learn tolerances from".into(),
            ));
        }
        let table = Options::default();
        let mut samples: HashMap<Key, Samples> = HashMap::default();
        let mut names = foldhash::HashSet::default();
        let mut ops = foldhash::HashSet::default();
        for step in reference.steps() {
            for rank in reference.ranks() {
                let data = reference.load(step, rank)?;
                for n in &data.bench.nodes {
                    names.insert(module_path(n).to_owned());
                    ops.insert(op_kind(n).to_owned());
                }
                let judged = diagnose::judge_nodes(reference.mode(), &table, &data);
                gather(&data, &judged, &mut samples, |_| true);
            }
        }
        // The same model: most of the module names (without call indexes) and op kinds of the
        // target's golden are in the reference's golden.
        let step = target.steps().first().copied().unwrap_or(0);
        let rank = target.ranks().first().copied().unwrap_or(0);
        let data = target.load(step, rank)?;
        let (mut shared_names, mut all_names) = (0usize, 0usize);
        let mut target_ops = foldhash::HashSet::default();
        for n in &data.bench.nodes {
            target_ops.insert(op_kind(n));
            if n.node_type == 0 {
                all_names += 1;
                shared_names += names.contains(module_path(n)) as usize;
            }
        }
        let shared_ops = target_ops.iter().filter(|o| ops.contains(**o)).count();
        let share = |a: usize, b: usize| if b == 0 { 1.0 } else { a as f64 / b as f64 };
        if share(shared_names, all_names) < MIN_SHARED
            || share(shared_ops, target_ops.len()) < MIN_SHARED
        {
            return Err(bad(format!(
                "its golden is another model: it holds {shared_names} of the {all_names} module \
                 names and {shared_ops} of the {} op kinds of the golden of {}",
                target_ops.len(),
                target.path().display()
            )));
        }
        let kinds = samples
            .into_iter()
            .filter(|(_, s)| s.outputs.len() >= MIN_SAMPLES)
            .map(|(key, s)| {
                let table = table.tolerance(key.2, key.2);
                learn(key, s, table, None)
            })
            .collect();
        Ok(LearnedTolerances::new(
            LearnedFrom::Reference {
                file: path.to_owned(),
            },
            kinds,
        ))
    }

    /// Tightens the tolerances of `opts` (its learned ones, else its dtype table) from the
    /// compare's own ranks, judged with them: per op kind, the [`QUANTILE`] of the errors of its
    /// nodes whose activation inputs, weights and arguments agree, times [`MARGIN`], where that
    /// is below what `opts` had; never above it. Kinds that do not tighten keep what `opts` had.
    /// `None` when nothing is tighter than the table.
    pub fn tightened(
        opts: &Options,
        ranks: &[(&RankData, &[Option<Judgement<'_>>])],
    ) -> Option<LearnedTolerances> {
        let mut samples: HashMap<Key, Samples> = HashMap::default();
        for (data, judged) in ranks {
            gather(data, judged, &mut samples, |j| {
                j.causes.is_empty() && j.inputs_agree()
            });
        }
        let before = opts.learned.as_deref();
        let had = |op: &str, direction: Direction, dtype: DtypeClass| {
            let table = opts.tolerance(dtype, dtype);
            match before.and_then(|b| b.get(op, direction, dtype)) {
                Some(l) => (l.output, l.input_agree),
                None => (table, table.agree),
            }
        };
        let mut kinds: Vec<Learned> = samples
            .into_iter()
            .filter(|(_, s)| s.outputs.len() >= MIN_SAMPLES)
            .map(|(key, s)| {
                let table = opts.tolerance(key.2, key.2);
                let cap = had(&key.0, key.1, key.2);
                learn(key, s, table, Some(cap))
            })
            .filter(|l| l.output.jump < opts.tolerance(l.dtype, l.dtype).jump)
            .collect();
        if let Some(b) = before {
            for l in &b.kinds {
                if !kinds
                    .iter()
                    .any(|k| (&k.op, k.direction, k.dtype) == (&l.op, l.direction, l.dtype))
                {
                    kinds.push(l.clone());
                }
            }
        }
        (!kinds.is_empty()).then(|| LearnedTolerances::new(LearnedFrom::Tightened, kinds))
    }
}

/// The tolerance of one op kind from its samples: [`MARGIN`] times their [`QUANTILE`], for its
/// outputs (agree and jump alike: the kind's own noise) and its activation inputs (`table`'s
/// agree when it has none). With `cap` (outputs, inputs' agree), never above it.
fn learn(key: Key, mut s: Samples, table: Tolerance, cap: Option<(Tolerance, f64)>) -> Learned {
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
fn module_path(n: &Node) -> &str {
    if n.node_type == 0 {
        match n.name.rsplit_once('.') {
            Some((head, tail)) if tail.bytes().all(|b| b.is_ascii_digit()) => head,
            _ => &n.name,
        }
    } else {
        crate::site::api_kind(&n.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_op_kind_is_the_api_or_the_module_class() {
        let node = |name: &str, t: i32| Node {
            node_type: t,
            ..crate::load::tests_support::node(name)
        };
        assert_eq!(
            op_kind(&node("Functional.linear.12.forward", 1)),
            "Functional.linear"
        );
        assert_eq!(
            op_kind(&node("Module.layers.0.mlp.fc1.Linear.forward.0", 0)),
            "Linear"
        );
        assert_eq!(op_kind(&node("Module.Block.backward.3", 0)), "Block");
    }

    #[test]
    fn the_quantile_is_the_nearest_rank() {
        let mut v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert!((quantile(&mut v, 0.95) - 19.05).abs() < 1e-12);
        assert_eq!(quantile(&mut v, 0.5), 10.5);
        assert_eq!(quantile(&mut [3.0], 0.95), 3.0);
    }
}
