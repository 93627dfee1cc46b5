//! Where a source sits in the model, the same in every micro-batch, rank and step: its call
//! site ([`CallSite`]), and which ranks hold the same layers under the same names ([`RankClass`]).
//!
//! Each micro-batch's copy of a call has its own name (`Functional.layer_norm.3.forward`,
//! `….100.forward`; `Module.layers.1.ln2.LayerNorm.forward.0` … `.7`), so a call site is named
//! by what stays: the enclosing module without its call index, the API (or the module's own
//! class) and its position among that API's calls inside the module, and the pass. Under
//! pipeline parallelism `layers.0` of one stage is another layer than `layers.0` of the next,
//! so ranks group together only within one class.

use foldhash::HashSet;

use crate::load::{Direction, NodeRef, SideGraph};

/// Where a source sits in the model, the same for every micro-batch, rank and step.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct CallSite {
    /// The enclosing module without its call index (`Module.layers.2.mlp.fc1.Linear.forward`);
    /// for a module source, the module itself without its call index.
    pub module: String,
    /// The API called (`Functional.linear`); empty for a module source.
    pub api: String,
    /// Its position among that API's calls directly inside the module, from 0.
    pub call: u32,
    pub direction: Direction,
}

/// The layers a rank holds, under which names: ranks of one class may be grouped.
pub type RankClass = u64;

/// `name` without a trailing `.<digits>` (a module's call index).
pub(crate) fn without_call_index(name: &str) -> &str {
    match name.rsplit_once('.') {
        Some((head, tail)) if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => name,
    }
}

/// An API node's kind: its name without `.<index>.<direction>` (`Functional.linear`).
pub(crate) fn api_kind(name: &str) -> &str {
    let mut head = name;
    // `<kind>.<index>.<forward|backward>` (msprobe); be lenient about what follows the index.
    while let Some((h, tail)) = head.rsplit_once('.') {
        head = h;
        if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) {
            return head;
        }
    }
    name
}

/// The call site of node `i` of `graph`.
pub fn call_site(graph: &SideGraph, i: u32) -> CallSite {
    let n = graph.node(i);
    if n.node_type == 0 {
        return CallSite {
            module: without_call_index(n.name()).to_owned(),
            api: String::new(),
            call: 0,
            direction: n.direction,
        };
    }
    let kind = api_kind(n.name());
    let (module, call) = match n.parent {
        Some(p) => {
            let parent = graph.node(p);
            let call = parent
                .children
                .iter()
                .take_while(|&&c| c != i)
                .filter(|&&c| api_kind(graph.node(c).name()) == kind)
                .count();
            (without_call_index(parent.name()), call as u32)
        }
        None => ("", 0),
    };
    CallSite {
        module: module.to_owned(),
        api: kind.to_owned(),
        call,
        direction: n.direction,
    }
}

/// Point-to-point communication: what pipeline stages pass activations with.
fn is_point_to_point(n: NodeRef<'_>) -> bool {
    let Some(rest) = n.name().strip_prefix("Distributed.") else {
        return false;
    };
    let api = rest.split('.').next().unwrap_or("");
    matches!(
        api,
        "send"
            | "recv"
            | "isend"
            | "irecv"
            | "batch_isend_irecv"
            | "send_object_list"
            | "recv_object_list"
    )
}

/// The set of a rank's module names without call indexes, as one number (equal sets, equal
/// numbers).
pub fn module_signature(graph: &SideGraph) -> u64 {
    use std::hash::BuildHasher;
    let names: HashSet<&str> = graph
        .iter()
        .filter(|n| n.node_type == 0)
        .map(|n| without_call_index(n.name()))
        .collect();
    // Order-independent: the sum of the names' hashes.
    let state = foldhash::fast::FixedState::with_seed(0x6c61_7965);
    names
        .into_iter()
        .fold(0u64, |acc, n| acc.wrapping_add(state.hash_one(n)))
}

/// Whether a rank's graph holds point-to-point communication.
pub fn has_point_to_point(graph: &SideGraph) -> bool {
    graph.iter().any(is_point_to_point)
}

/// The class of each rank's graph (`signatures`: [`module_signature`] per rank; `p2p`: whether
/// any rank communicates point to point). Pipeline stages pass activations point to point and
/// hold different modules (the first stage the embedding, the last the head): when both are
/// seen, the file is pipeline-parallel, and stages in the middle may hold the same names for
/// other layers, so every rank is its own class. Otherwise ranks with the same module names
/// hold the same layers (data or tensor parallel copies) and share a class.
pub fn rank_classes(signatures: &[(i64, u64)], p2p: bool) -> Vec<RankClass> {
    use std::hash::BuildHasher;
    let differ = signatures.windows(2).any(|w| w[0].1 != w[1].1);
    signatures
        .iter()
        .map(|&(rank, signature)| {
            if p2p && differ {
                foldhash::fast::FixedState::with_seed(0x7069_7065).hash_one(rank)
            } else {
                signature
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_their_call_index_and_apis_their_number() {
        assert_eq!(
            without_call_index("Module.layers.2.mlp.fc1.Linear.forward.7"),
            "Module.layers.2.mlp.fc1.Linear.forward"
        );
        assert_eq!(
            api_kind("Functional.linear.1213.forward"),
            "Functional.linear"
        );
        assert_eq!(api_kind("Tensor.__add__.3.backward"), "Tensor.__add__");
    }
}
