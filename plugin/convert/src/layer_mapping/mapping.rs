//! The mapping of a target/golden pair, and the matching of graph nodes through it.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;

use super::error::LayerMappingError;
use super::rules::{ignored_warning, load_rules, CancelCheck, Rules};
use super::side::Side;
use crate::error::ConvertError;
use crate::graph::Graph;
use crate::options::LayerMapping;
use crate::rank_dump::RankDump;

/// Target entry name → golden entry name (`None`: no golden entry at the translated scope).
pub type ApiMapping = HashMap<String, Option<String>>;

/// msprobe's `generate_api_mapping_by_layer_mapping` on two read sides; stops with
/// [`LayerMappingError::Cancelled`] soon after `cancel` is set.
pub fn api_mapping(
    npu: &Side,
    bench: &Side,
    rules: &Rules,
    cancel: &AtomicBool,
) -> Result<ApiMapping, LayerMappingError> {
    let mut out = HashMap::with_capacity(npu.entries.len());
    let count = Cell::new(0);
    let check = CancelCheck {
        flag: cancel,
        count: &count,
    };
    for (i, e) in npu.entries.iter().enumerate() {
        check.tick()?;
        let scope = npu.translate(i, rules)?;
        let golden = bench
            .lookup(&scope, &e.direction, npu.positions[i])
            .map(str::to_string);
        out.insert(e.name.clone(), golden);
    }
    Ok(out)
}

/// The mapping of one target/golden rank pair, or an empty one (with a warning on stderr) when
/// msprobe would drop it. Errors only for a missing or unreadable mapping file, or once
/// `cancel` is set ([`ConvertError::Cancelled`]).
pub fn mapping_for(
    lm: &LayerMapping,
    npu: &RankDump,
    bench: &RankDump,
    cancel: &AtomicBool,
) -> Result<ApiMapping, ConvertError> {
    let rules = match load_rules(lm, &npu.confine, cancel) {
        Ok(rules) => rules,
        // Content problems were already reported by `preflight`: the mapping is then empty.
        Err(e) if e.drops_mapping() => return Ok(ApiMapping::new()),
        Err(e) => return Err(e.into()),
    };
    let made = Side::read(npu)
        .and_then(|n| Ok((n, Side::read(bench)?)))
        .and_then(|(n, b)| api_mapping(&n, &b, &rules, cancel));
    match made {
        Ok(m) => Ok(m),
        Err(LayerMappingError::Cancelled) => Err(ConvertError::Cancelled),
        Err(why) => {
            eprintln!("graph-ascend: warning: {}", ignored_warning(&why));
            Ok(ApiMapping::new())
        }
    }
}

/// Pairs nodes through `mapping` (msprobe's `Graph.mapping_match`), breadth-first from the
/// target root: each side's link is the other side's ancestors and id. Stops with
/// [`ConvertError::Cancelled`] soon after `cancel` is set.
pub fn match_graphs(
    npu: &mut Graph,
    bench: &mut Graph,
    mapping: &ApiMapping,
    cancel: &AtomicBool,
) -> Result<(), ConvertError> {
    let count = Cell::new(0);
    let check = CancelCheck {
        flag: cancel,
        count: &count,
    };
    for n in npu.bfs() {
        check.tick()?;
        let id = npu.id(n);
        let golden = match mapping.get(id) {
            Some(Some(g)) => bench.get(g),
            Some(None) => None,
            None => bench.get(id),
        };
        let Some(b) = golden else {
            continue;
        };
        let mut npu_link = bench.ancestors(b);
        npu_link.push(bench.id(b).to_string());
        let mut bench_link = npu.ancestors(n);
        bench_link.push(npu.id(n).to_string());
        npu.nodes[n].set_matched(Some(b));
        npu.nodes[n].set_matched_link(npu_link);
        bench.nodes[b].set_matched(Some(n));
        bench.nodes[b].set_matched_link(bench_link);
    }
    Ok(())
}
