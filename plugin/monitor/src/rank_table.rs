//! One rank of one run in memory: for each series (in the order first read: the CSV's order,
//! i.e. execution order) one `f32` per step of the chosen statistic. Rows are not kept: a
//! 10,000-step rank of 1,600 series is 64 MB, whatever the files' size.
use foldhash::HashMap;

use crate::name::SeriesKey;

/// The longest span of steps one series may cover (a bound on what a bad step number makes us
/// allocate): 10 million steps.
pub const MAX_STEP_SPAN: i64 = 10_000_000;

#[derive(Clone, Debug, Default)]
struct Values {
    first: i64,
    /// By `step - first`; NaN where the step has no row (or msprobe wrote `nan`).
    values: Vec<f32>,
}

#[derive(Clone, Debug, Default)]
pub struct RankTable {
    index: HashMap<SeriesKey, u32>,
    series: Vec<SeriesKey>,
    values: Vec<Values>,
    rows: u64,
}

/// A step too far from the series' other steps (see [`MAX_STEP_SPAN`]).
#[derive(Debug)]
pub struct StepOutOfRange;

impl RankTable {
    /// Stores `value` of `key` at `step` (a later row of the same series and step replaces it).
    pub fn insert(&mut self, key: &SeriesKey, step: i64, value: f64) -> Result<(), StepOutOfRange> {
        let id = match self.index.get(key) {
            Some(&id) => id as usize,
            None => {
                let id = self.series.len();
                self.index.insert(key.clone(), id as u32);
                self.series.push(key.clone());
                self.values.push(Values {
                    first: step,
                    values: Vec::new(),
                });
                id
            }
        };
        let v = &mut self.values[id];
        if step < v.first {
            let shift = v.first - step;
            if shift + v.values.len() as i64 > MAX_STEP_SPAN {
                return Err(StepOutOfRange);
            }
            v.values
                .splice(0..0, std::iter::repeat_n(f32::NAN, shift as usize));
            v.first = step;
        }
        let at = step - v.first;
        if at >= MAX_STEP_SPAN {
            return Err(StepOutOfRange);
        }
        let at = at as usize;
        if at >= v.values.len() {
            v.values.resize(at + 1, f32::NAN);
        }
        v.values[at] = value as f32;
        self.rows += 1;
        Ok(())
    }

    /// The series in the order first read.
    pub fn series(&self) -> &[SeriesKey] {
        &self.series
    }

    pub fn id(&self, key: &SeriesKey) -> Option<u32> {
        self.index.get(key).copied()
    }

    /// The value of series `id` at `step`, when it has one.
    pub fn get(&self, id: u32, step: i64) -> Option<f32> {
        let v = self.values.get(id as usize)?;
        let at = usize::try_from(step - v.first).ok()?;
        v.values.get(at).copied().filter(|x| !x.is_nan())
    }

    /// The steps series `id` spans (first, last), when it has any.
    pub fn span(&self, id: u32) -> Option<(i64, i64)> {
        let v = self.values.get(id as usize)?;
        (!v.values.is_empty()).then(|| (v.first, v.first + v.values.len() as i64 - 1))
    }

    /// How many rows were read into the table.
    pub fn rows(&self) -> u64 {
        self.rows
    }
}
