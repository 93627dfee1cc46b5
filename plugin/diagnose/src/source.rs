//! A source of error: the node, its call site, why it is one, and the numbers behind it.

use crate::judge::{Cause, Level};
use crate::load::Direction;
use crate::reason::ReasonPart;
use crate::site::{CallSite, RankClass};

/// Why a node is a source.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// A weight or a non-tensor argument differs.
    Cause,
    /// Inputs agree with golden; outputs do not.
    Introduced,
    /// Inputs already differ a little; outputs differ far more.
    Amplified,
}

/// One source of error.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Source {
    pub step: i64,
    pub rank: i64,
    /// The target node (the innermost of its group).
    pub node: String,
    /// Its golden partner.
    pub golden_node: String,
    pub direction: Direction,
    pub kind: SourceKind,
    /// The differing weights and arguments.
    pub causes: Vec<Cause<'static>>,
    /// How many times worse the outputs are than the inputs (`None` in md5 mode).
    pub score: Option<f64>,
    pub input: Option<Level<'static>>,
    pub output: Option<Level<'static>>,
    /// Enclosing modules that are sources only through this node, innermost first.
    pub enclosing: Vec<String>,
    /// The reason in English words ([`crate::reason::sentence`] of `reason_parts`).
    pub reason: String,
    /// The reason as data, for other languages.
    pub reason_parts: Vec<ReasonPart>,
    /// The micro-batch it ran in (`tb_nodes.micro_step_id`).
    pub micro_step: i64,
    /// Its call site, the same in every micro-batch, rank and step ([`crate::site`]).
    pub site: CallSite,
    /// The layers its rank holds under which names: sources group across ranks of one class.
    #[serde(skip)]
    pub rank_class: RankClass,
    /// Its group's index in [`crate::Diagnosis::groups`].
    pub group: usize,
}
