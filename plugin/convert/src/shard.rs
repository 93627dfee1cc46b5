//! `--shard I/N`: which share of a conversion's work units one process converts.
//!
//! The units are the plan's (step, rank) graphs, in the plan's order (see
//! [`crate::stage::plan`]); shard `I` of `N` takes the contiguous run
//! `[⌊n·I/N⌋, ⌊n·(I+1)/N⌋)` of the `n` units. Contiguous, so that the parts, gathered in shard
//! order, hold the rows in exactly the order an unsharded run writes them; balanced to within one
//! unit. `I` and `N` come from the flag, or from the job array's own variables when the flag is
//! bare ([`ShardSpec::from_env`]).

use std::ops::Range;

use crate::error::ConvertError;

/// Shard `index` of `count` (`index < count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpec {
    pub index: u32,
    pub count: u32,
}

impl ShardSpec {
    /// Shard `index` of `count`; an error unless `0 ≤ index < count`.
    pub fn new(index: u32, count: u32) -> Result<ShardSpec, ConvertError> {
        if count == 0 {
            return Err(ConvertError::Usage(
                "--shard: the shard count N must be at least 1".into(),
            ));
        }
        if index >= count {
            return Err(ConvertError::Usage(format!(
                "--shard {index}/{count}: shards are numbered 0 to {} (I must be below N)",
                count - 1
            )));
        }
        Ok(ShardSpec { index, count })
    }

    /// `I/N` as typed after `--shard`.
    pub fn parse(text: &str) -> Result<ShardSpec, ConvertError> {
        let bad = || {
            ConvertError::Usage(format!(
                "--shard {text:?}: expected I/N (e.g. 3/16: shard 3 of 16, numbered from 0)"
            ))
        };
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index = i.trim().parse().map_err(|_| bad())?;
        let count = n.trim().parse().map_err(|_| bad())?;
        ShardSpec::new(index, count)
    }

    /// The shard of this task of a job array, from the scheduler's variables (`var` looks one
    /// up; the process environment in the CLI):
    /// - Slurm: `SLURM_ARRAY_TASK_ID` relative to `SLURM_ARRAY_TASK_MIN` in steps of
    ///   `SLURM_ARRAY_TASK_STEP` (so `--array=1-16` and `--array=0-30:2` both give 0..N), of
    ///   `SLURM_ARRAY_TASK_COUNT`;
    /// - Kubernetes Indexed Job (also under Volcano): `JOB_COMPLETION_INDEX`, of `count`
    ///   (the Job's `completions`, which the pod's environment does not carry).
    ///
    /// `count`, when given, also overrides Slurm's count.
    pub fn from_env(
        var: impl Fn(&str) -> Option<String>,
        count: Option<u32>,
    ) -> Result<ShardSpec, ConvertError> {
        let number = |name: &str| -> Result<Option<i64>, ConvertError> {
            match var(name) {
                None => Ok(None),
                Some(v) if v.trim().is_empty() => Ok(None),
                Some(v) => v.trim().parse().map(Some).map_err(|_| {
                    ConvertError::Usage(format!("--shard: {name}={v:?} is not a number"))
                }),
            }
        };
        let to_u32 = |what: &str, v: i64| {
            u32::try_from(v)
                .map_err(|_| ConvertError::Usage(format!("--shard: {what} {v} is out of range")))
        };
        if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
            let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let step = number("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
            let offset = id - min;
            if offset < 0 || offset % step != 0 {
                return Err(ConvertError::Usage(format!(
                    "--shard: SLURM_ARRAY_TASK_ID {id} is not on the array's grid \
                     (min {min}, step {step})"
                )));
            }
            let count = match (count, number("SLURM_ARRAY_TASK_COUNT")?) {
                (Some(c), _) => c,
                (None, Some(c)) => to_u32("SLURM_ARRAY_TASK_COUNT", c)?,
                (None, None) => {
                    return Err(ConvertError::Usage(
                        "--shard: SLURM_ARRAY_TASK_COUNT is not set; give --shard-count N".into(),
                    ))
                }
            };
            return ShardSpec::new(to_u32("array task offset", offset / step)?, count);
        }
        if let Some(index) = number("JOB_COMPLETION_INDEX")? {
            let Some(count) = count else {
                return Err(ConvertError::Usage(
                    "--shard in a Kubernetes Indexed Job needs --shard-count N \
                     (the Job's completions)"
                        .into(),
                ));
            };
            return ShardSpec::new(to_u32("JOB_COMPLETION_INDEX", index)?, count);
        }
        Err(ConvertError::Usage(
            "a bare --shard takes its shard from a job array: neither SLURM_ARRAY_TASK_ID \
             (Slurm) nor JOB_COMPLETION_INDEX (Kubernetes Indexed Job) is set; give --shard I/N"
                .into(),
        ))
    }

    /// The units of `total` this shard converts (empty when there are fewer units than shards
    /// and this one gets none).
    pub fn units(&self, total: usize) -> Range<usize> {
        let at = |i: u32| (total as u128 * u128::from(i) / u128::from(self.count)) as usize;
        at(self.index)..at(self.index + 1)
    }
}

impl std::fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn units_cover_every_unit_once_in_order() {
        for total in [0usize, 1, 2, 5, 64, 1000] {
            for count in [1u32, 2, 3, 16, 70] {
                let mut next = 0;
                for index in 0..count {
                    let r = ShardSpec::new(index, count).unwrap().units(total);
                    assert_eq!(r.start, next);
                    assert!(r.len() <= total / count as usize + 1);
                    next = r.end;
                }
                assert_eq!(next, total);
            }
        }
    }

    #[test]
    fn parse_and_range_errors() {
        assert_eq!(
            ShardSpec::parse("3/16").unwrap(),
            ShardSpec {
                index: 3,
                count: 16
            }
        );
        let err = |t: &str| ShardSpec::parse(t).unwrap_err().to_string();
        assert!(
            err("16/16").contains("I must be below N"),
            "{}",
            err("16/16")
        );
        assert!(err("0/0").contains("at least 1"));
        assert!(err("3").contains("expected I/N"));
        assert!(err("a/b").contains("expected I/N"));
        assert!(err("-1/4").contains("expected I/N"));
    }

    #[test]
    fn slurm_array_variables() {
        let s = ShardSpec::from_env(
            env(&[
                ("SLURM_ARRAY_TASK_ID", "7"),
                ("SLURM_ARRAY_TASK_MIN", "1"),
                ("SLURM_ARRAY_TASK_COUNT", "16"),
            ]),
            None,
        )
        .unwrap();
        assert_eq!((s.index, s.count), (6, 16));
        // --array=0-30:2 → ids 0, 2, …, 30.
        let s = ShardSpec::from_env(
            env(&[
                ("SLURM_ARRAY_TASK_ID", "30"),
                ("SLURM_ARRAY_TASK_MIN", "0"),
                ("SLURM_ARRAY_TASK_STEP", "2"),
                ("SLURM_ARRAY_TASK_COUNT", "16"),
            ]),
            None,
        )
        .unwrap();
        assert_eq!((s.index, s.count), (15, 16));
        let off_grid = ShardSpec::from_env(
            env(&[
                ("SLURM_ARRAY_TASK_ID", "3"),
                ("SLURM_ARRAY_TASK_STEP", "2"),
                ("SLURM_ARRAY_TASK_COUNT", "16"),
            ]),
            None,
        );
        assert!(off_grid.unwrap_err().to_string().contains("grid"));
    }

    #[test]
    fn kubernetes_index_needs_the_count() {
        let vars = [("JOB_COMPLETION_INDEX", "4")];
        let s = ShardSpec::from_env(env(&vars), Some(8)).unwrap();
        assert_eq!((s.index, s.count), (4, 8));
        let e = ShardSpec::from_env(env(&vars), None).unwrap_err();
        assert!(e.to_string().contains("--shard-count"));
        let e = ShardSpec::from_env(env(&vars), Some(4)).unwrap_err();
        assert!(e.to_string().contains("below N"));
        let e = ShardSpec::from_env(env(&[]), Some(4)).unwrap_err();
        assert!(e.to_string().contains("SLURM_ARRAY_TASK_ID"));
    }
}
