//! One side's merge in progress; its merging is in [`super`] (the strategy and the API
//! collections), [`super::tp`] and [`super::pp`].

use super::forest::Forest;
use crate::parallel::ParallelParams;

/// One side's merge: the forest of its ranks and its layout.
pub(crate) struct Merger<'a> {
    pub forest: Forest,
    pub params: &'a ParallelParams,
}
