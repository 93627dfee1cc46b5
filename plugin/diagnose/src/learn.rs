//! Learning tolerances ([`LearnedTolerances`]) from data (docs/diagnosis.md §13):
//!
//! - from a **reference** ([`LearnedTolerances::from_reference`]): a compare of a fault-free run
//!   at the target's dtype against the golden on the golden's hardware, made from other data or
//!   seeds. It measures precision noise. Each op kind with at least [`MIN_SAMPLES`] judged nodes
//!   gets [`MARGIN`] times the [`QUANTILE`] of its nodes' output errors (the diagnosis's own
//!   measure, [`crate::judge::deviation`]) as its output tolerance, and the same of its input
//!   errors as its inputs' agree tolerance; other kinds keep the dtype table.
//! - from the **compare itself** ([`LearnedTolerances::tightened`]): the same estimate over the
//!   nodes whose inputs, weights and arguments agree, used only where it is *below* what the
//!   rules had (never above, never below one unit of round-off of the noise class). An operator
//!   wrong on every call makes its own kind's estimate large: the table stays, so a bug that is
//!   everywhere cannot teach the rules that it is normal.
//!
//! Against a learned tolerance a node introduces an error when what its output adds to its
//! inputs' error is above its op's noise ([`crate::judge::Judgement::introduces_error`]).

use std::path::Path;

use foldhash::HashMap;
use rayon::prelude::*;

use crate::entry::DtypeClass;
use crate::error::DiagnoseError;
use crate::judge::{Judge, Judgement};
use crate::load::{CompareFile, Direction, Mode, RankData};
use crate::options::Options;
use crate::tolerance::{
    learn, module_path, op_kind, FewSamples, Key, Learned, LearnedFrom, LearnedTolerances, Samples,
    MIN_SHARED, MIN_SMALL_SAMPLES,
};
#[cfg(doc)]
use crate::tolerance::{MARGIN, MIN_SAMPLES, QUANTILE};

/// Nodes judged at once by [`gather`] (on every core) before their errors are added: a bounded
/// buffer, whatever the size of the rank.
const GATHER_CHUNK: u32 = 1 << 16;

/// Adds the errors of one rank's judged nodes to `samples`, in node order; `keep` chooses the
/// nodes.
fn gather(
    judge: &Judge<'_>,
    data: &RankData,
    samples: &mut HashMap<Key, Samples>,
    keep: impl Fn(&Judgement<'_>) -> bool + Sync,
) {
    let n = judge.len() as u32;
    for start in (0..n).step_by(GATHER_CHUNK as usize) {
        // (node, noise class, output dtype, output error, input error or NaN)
        let kept: Vec<(u32, DtypeClass, DtypeClass, f64, f64)> = (start
            ..n.min(start + GATHER_CHUNK))
            .into_par_iter()
            .filter_map(|i| {
                let j = judge.node(i)?;
                let out = j.output.as_ref()?;
                if !out.err.is_finite() || out.noise == DtypeClass::Exact || !keep(&j) {
                    return None;
                }
                let input = j.input.as_ref().map_or(f64::NAN, |l| l.err);
                Some((i, out.noise, out.dtype, out.err, input))
            })
            .collect();
        for (i, noise, dtype, out, input) in kept {
            let n = data.npu.node(i);
            let s = samples
                .entry((op_kind(n).to_owned(), n.direction, noise))
                .or_default();
            s.finest = s.finest.min(dtype);
            s.outputs.push(out);
            if input.is_finite() {
                s.inputs.push(input);
            }
        }
    }
}

impl LearnedTolerances {
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
                for n in data.bench.iter() {
                    names.insert(module_path(n).to_owned());
                    ops.insert(op_kind(n).to_owned());
                }
                let judge = Judge::of_rank(reference.mode(), &table, &data);
                gather(&judge, &data, &mut samples, |_| true);
            }
        }
        // The same model: most of the module names (without call indexes) and op kinds of the
        // target's golden are in the reference's golden.
        let step = target.steps().first().copied().unwrap_or(0);
        let rank = target.ranks().first().copied().unwrap_or(0);
        let data = target.load(step, rank)?;
        let (mut shared_names, mut all_names) = (0usize, 0usize);
        let mut target_ops = foldhash::HashSet::default();
        for n in data.bench.iter() {
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
        let (kinds, few) = split_few(samples);
        let kinds = kinds
            .into_iter()
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
            few,
        ))
    }

    /// Tightens the tolerances of `opts` (its learned ones, else its dtype table) from the
    /// compare's own ranks, judged with them: per op kind, the [`QUANTILE`] of the errors of its
    /// nodes whose activation inputs, weights and arguments agree, times [`MARGIN`], where that
    /// is below what `opts` had; never above it. Kinds that do not tighten keep what `opts` had.
    /// `None` when nothing is tighter than the table.
    ///
    /// With tolerances from a reference, only the kinds the reference did not learn (too few
    /// samples in it, [`LearnedTolerances::few_samples`], or none) are tightened: the reference's
    /// stay as they are.
    pub fn tightened(opts: &Options, mode: Mode, ranks: &[RankData]) -> Option<LearnedTolerances> {
        let mut samples: HashMap<Key, Samples> = HashMap::default();
        for data in ranks {
            let judge = Judge::of_rank(mode, opts, data);
            gather(&judge, data, &mut samples, |j| {
                j.causes.is_empty() && j.inputs_agree()
            });
        }
        let before = opts.learned.as_deref();
        let from_reference =
            before.is_some_and(|b| matches!(b.from, LearnedFrom::Reference { .. }));
        if let Some(b) = before.filter(|_| from_reference) {
            samples.retain(|key, _| b.get(&key.0, key.1, key.2).is_none());
        }
        let had = |op: &str, direction: Direction, dtype: DtypeClass| {
            let table = opts.tolerance(dtype, dtype);
            match before.and_then(|b| b.get(op, direction, dtype)) {
                Some(l) => (l.output, l.input_agree),
                None => (table, table.agree),
            }
        };
        let (kinds, few) = split_few(samples);
        let mut kinds: Vec<Learned> = kinds
            .into_iter()
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
        let from = match before {
            Some(b) if from_reference => b.from.clone(),
            _ => LearnedFrom::Tightened,
        };
        let few = match before {
            Some(b) if from_reference => b.few_samples.clone(),
            _ => few,
        };
        (!kinds.is_empty()).then(|| LearnedTolerances::new(from, kinds, few))
    }
}

/// The kinds with enough samples to learn from ([`MIN_SMALL_SAMPLES`]), and the others.
fn split_few(samples: HashMap<Key, Samples>) -> (Vec<(Key, Samples)>, Vec<FewSamples>) {
    let mut few = Vec::new();
    let mut kinds = Vec::new();
    for (key, s) in samples {
        if s.outputs.len() >= MIN_SMALL_SAMPLES {
            kinds.push((key, s));
        } else {
            few.push(FewSamples {
                op: key.0,
                direction: key.1,
                dtype: key.2,
                samples: s.outputs.len(),
            });
        }
    }
    (kinds, few)
}
