//! Step 1, plan: which rank folders a conversion reads, as msprobe classifies its inputs (see
//! [`crate::layout`]). A compare needs the same layout on both sides and uses the steps and
//! ranks present on both.

use std::path::{Path, PathBuf};

use crate::error::ConvertError;
use crate::layout::{self, Layout};
use crate::options::ConvertOptions;
use crate::part::InputDirs;

/// One unit of work of a plain conversion: one rank of one step (one side or both).
pub(crate) struct Job {
    pub step: i64,
    pub rank: i64,
    pub target: PathBuf,
    pub golden: Option<PathBuf>,
}

impl Job {
    /// The job's folders, for a part's fingerprint.
    pub fn input_dirs(&self) -> InputDirs<'_> {
        InputDirs {
            step: self.step,
            rank: self.rank,
            target: &self.target,
            golden: self.golden.as_deref(),
        }
    }
}

/// The units of a plain conversion and the rank and step lists of its output.
pub(crate) struct Plan {
    pub jobs: Vec<Job>,
    pub layout: Layout,
    pub ranks: Vec<i64>,
    pub steps: Vec<i64>,
}

/// One step of a conversion: its number and its folder on each side.
pub(crate) struct StepDirs {
    pub step: i64,
    pub target: PathBuf,
    pub golden: Option<PathBuf>,
}

/// The layout of the target, checked to be the golden's too.
pub(crate) fn layout(opts: &ConvertOptions) -> Result<Layout, ConvertError> {
    layout::classify_both(&opts.target, opts.golden.as_deref())
}

/// The step folders of a `Steps` layout: every target step, or in a compare the steps that
/// both sides have (an error when there is none).
pub(crate) fn common_steps(opts: &ConvertOptions) -> Result<Vec<StepDirs>, ConvertError> {
    Ok(layout::common_steps(&opts.target, opts.golden.as_deref())?
        .into_iter()
        .map(|(step, target, golden)| StepDirs {
            step,
            target,
            golden,
        })
        .collect())
}

/// The units of a plain conversion: one per rank folder (per step), paired by rank number.
pub(crate) fn plan(opts: &ConvertOptions) -> Result<Plan, ConvertError> {
    let layout = layout(opts)?;
    let mut jobs = Vec::new();
    match layout {
        Layout::Files => jobs.push(Job {
            step: 0,
            rank: 0,
            target: opts.target.clone(),
            golden: opts.golden.clone(),
        }),
        Layout::Ranks => rank_jobs(0, &opts.target, opts.golden.as_deref(), &mut jobs)?,
        Layout::Steps => {
            for s in common_steps(opts)? {
                rank_jobs(s.step, &s.target, s.golden.as_deref(), &mut jobs)?;
            }
        }
    }
    let mut ranks: Vec<i64> = jobs.iter().map(|j| j.rank).collect();
    ranks.sort();
    ranks.dedup();
    let mut steps: Vec<i64> = jobs.iter().map(|j| j.step).collect();
    steps.sort();
    steps.dedup();
    Ok(Plan {
        jobs,
        layout,
        ranks,
        steps,
    })
}

/// The jobs of one step folder: its ranks, or in a compare the ranks both sides have.
fn rank_jobs(
    step: i64,
    target: &Path,
    golden: Option<&Path>,
    jobs: &mut Vec<Job>,
) -> Result<(), ConvertError> {
    for (rank, target, golden) in layout::common_ranks(target, golden)? {
        jobs.push(Job {
            step,
            rank,
            target,
            golden,
        });
    }
    Ok(())
}

/// The units of a parallel merge: its steps (a `Ranks` layout is one step, numbered from its
/// folder's `stepN` name in a build), and the step list of its output.
pub(crate) fn merged_steps(
    opts: &ConvertOptions,
) -> Result<(Vec<StepDirs>, Vec<i64>), ConvertError> {
    Ok(match layout(opts)? {
        Layout::Files => {
            return Err(ConvertError::Input {
                path: opts.target.clone(),
                message: "parallel merge (--rank_size) needs a folder of rankN/ folders (or of \
                          stepN/ folders of them), not a single rank's dump"
                    .into(),
            })
        }
        Layout::Ranks => {
            let step = if opts.golden.is_some() {
                0
            } else {
                opts.target
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_prefix("step"))
                    .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|d| d.parse().ok())
                    .unwrap_or(0)
            };
            let one = StepDirs {
                step,
                target: opts.target.clone(),
                golden: opts.golden.clone(),
            };
            (vec![one], vec![0])
        }
        Layout::Steps => {
            let steps = common_steps(opts)?;
            let list = steps.iter().map(|s| s.step).collect();
            (steps, list)
        }
    })
}
