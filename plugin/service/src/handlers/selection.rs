//! A request's selection: the served file, step, rank and micro step it names, checked.

use std::sync::Arc;

use graph_ascend_proto as pb;
use graph_ascend_visdb::store::{GraphKey, Side};
use graph_ascend_visdb::Store;

use super::reply::{HandlerError, Result, StoreContext};
use crate::catalog::GraphFile;
use crate::messages::{Lang, Msg};
use crate::state::State;

/// A request's selection, checked and resolved to a file.
pub(crate) struct Selection {
    pub file: Arc<GraphFile>,
    pub step: i64,
    pub rank: i64,
    pub micro_step: i64,
    /// Whether the file is a comparison, from the configuration [`select`] read.
    compare: bool,
}

impl Selection {
    /// Whether the selected file is a comparison (two graphs) rather than a single build.
    pub(crate) fn is_compare(&self) -> Result<bool> {
        Ok(self.compare)
    }

    pub(crate) fn graph(&self, side: Side) -> GraphKey {
        GraphKey {
            side,
            step: self.step,
            rank: self.rank,
        }
    }
}

/// The language of a request (for its error texts), before anything else is checked.
pub(crate) fn lang_of(meta: Option<&pb::MetaData>) -> Lang {
    Lang::parse(meta.map_or("en", |m| m.lang.as_str()))
}

/// msprobe's `check_file_type` + `safe_get_meta_data`: the file must exist, and step, rank and
/// micro step must be among the file's.
pub(crate) fn select(state: &State, meta: Option<&pb::MetaData>) -> Result<Selection> {
    // A request about a file: the answer before it has arrived, so the background work of
    // opening a file need not pause for it any longer (`step_aside`).
    state.step_aside.resume();
    let meta = meta.ok_or(HandlerError::Invalid(Msg::MetaData))?;
    let file = file_of(state, &meta.run, &meta.tag, &meta.r#type)?;
    let config = file.with_store(Store::config).context(Msg::LoadConfig)?;
    let selection = Selection {
        file,
        step: i64::from(meta.step.unwrap_or(0)),
        rank: i64::from(meta.rank.unwrap_or(0)),
        micro_step: i64::from(meta.micro_step.unwrap_or(-1)),
        compare: config.is_compare(),
    };
    let micro_ok = selection.micro_step == -1
        || (0..config.micro_steps.max(1)).contains(&selection.micro_step);
    let missing = if !config.steps.is_empty() && !config.steps.contains(&selection.step) {
        Some(("step", selection.step, listed(&config.steps)))
    } else if !config.ranks.is_empty() && !config.ranks.contains(&selection.rank) {
        Some(("rank", selection.rank, listed(&config.ranks)))
    } else if !micro_ok {
        let count = config.micro_steps.max(1);
        Some((
            "micro step",
            selection.micro_step,
            format!("-1 for all, or 0 to {}", count - 1),
        ))
    } else {
        None
    };
    if let Some((what, value, known)) = missing {
        return Err(HandlerError::Because(
            Msg::MetaData,
            not_in_file(&selection.file, what, value, &known),
        ));
    }
    Ok(selection)
}

/// Why a selection is refused: the file holds no such step, rank or micro step, and which it
/// holds.
pub(crate) fn not_in_file(file: &GraphFile, what: &str, value: i64, known: &str) -> String {
    format!(
        "{}.vis.db of run {:?} holds no {what} {value} (its {what}s: {known})",
        file.tag, file.run
    )
}

/// At most [`SHOWN_VALUES`] of a file's steps or ranks, for a message.
pub(crate) fn listed<T: ToString>(values: &[T]) -> String {
    let shown: Vec<String> = values.iter().take(SHOWN_VALUES).map(T::to_string).collect();
    let more = values.len().saturating_sub(SHOWN_VALUES);
    if more > 0 {
        format!("{}, and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// How many of a file's steps or ranks a message names.
const SHOWN_VALUES: usize = 20;

/// The served file named by a request's run, tag and type (msprobe's `check_file_type`).
pub(crate) fn file_of(state: &State, run: &str, tag: &str, kind: &str) -> Result<Arc<GraphFile>> {
    if run.is_empty() || tag.is_empty() {
        return Err(HandlerError::Invalid(Msg::MetaData));
    }
    if !kind.is_empty() && kind != "db" {
        return Err(HandlerError::Invalid(Msg::Type));
    }
    state
        .catalog
        .file(run, tag)
        .ok_or_else(|| unserved(state, run, tag))
}

/// "The database file could not be opened.", with why: the listing's error for the file, or
/// that the logdir holds no such file.
pub(crate) fn unserved(state: &State, run: &str, tag: &str) -> HandlerError {
    HandlerError::Because(Msg::DbInit, state.catalog.unserved_reason(run, tag))
}
