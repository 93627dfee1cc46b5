//! Pairs target ("NPU") nodes with golden ("Bench") nodes, as msprobe's `GraphComparator` does.
//!
//! - default: same id and the same chain of ancestor ids;
//! - `-fm` (fuzzy): modules by id alone, then the APIs directly under each matched pair by name
//!   and order of appearance (call counters ignored);
//! - `-lm [YAML]`: through msprobe's scope mapping of the dump entries, see
//!   [`crate::layer_mapping`]; with `-fm` as well, only the fuzzy matcher runs, as in msprobe.
//!
//! Walks the target graph breadth-first from the root, like msprobe.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;

use crate::error::ConvertError;
use crate::graph::Graph;
use crate::layer_mapping;
use crate::node::NodeOp;
use crate::options::{ConvertOptions, LayerMapping};
use crate::rank_dump::RankDump;

/// Matches the two graphs, filling `matched` and `matched_link` on both sides; a layer mapping
/// stops with [`ConvertError::Cancelled`] soon after `cancel` is set.
pub fn match_graphs(
    opts: &ConvertOptions,
    npu_dump: &RankDump,
    bench_dump: &RankDump,
    npu: &mut Graph,
    bench: &mut Graph,
    cancel: &AtomicBool,
) -> Result<(), ConvertError> {
    check_frameworks(npu_dump, bench_dump)?;
    let cross =
        framework_family(&npu_dump.dump.framework) != framework_family(&bench_dump.dump.framework);
    if cross && opts.layer_mapping == LayerMapping::None {
        return Err(ConvertError::Usage(format!(
            "{} ({}) and {} ({}) come from different frameworks: cross-framework comparison \
             needs -lm/--layer_mapping",
            npu_dump.dir.display(),
            npu_dump.dump.framework,
            bench_dump.dir.display(),
            bench_dump.dump.framework
        )));
    }
    // `-fm` wins over `-lm`: msprobe's `GraphComparator.compare` runs only the fuzzy matcher
    // when both are given (a MindSpore target then matches nothing in a PyTorch golden).
    if opts.fuzzy_match {
        match_fuzzy(npu, bench);
        return Ok(());
    }
    match &opts.layer_mapping {
        LayerMapping::Bare | LayerMapping::File(_) => {
            let mapping =
                layer_mapping::mapping_for(&opts.layer_mapping, npu_dump, bench_dump, cancel)?;
            layer_mapping::match_graphs(npu, bench, &mapping, cancel)?;
        }
        LayerMapping::None => match_default(npu, bench),
    }
    Ok(())
}

/// The pairs msprobe compares (`get_compare_framework`): a PyTorch target only against a
/// PyTorch golden, a MindSpore or MindTorch target against a PyTorch or MindSpore golden. A
/// dump without `framework` counts as PyTorch.
fn check_frameworks(npu_dump: &RankDump, bench_dump: &RankDump) -> Result<(), ConvertError> {
    let named = |f: &str| {
        if f.is_empty() {
            "pytorch".to_string()
        } else {
            f.to_string()
        }
    };
    let (target, golden) = (
        named(&npu_dump.dump.framework),
        named(&bench_dump.dump.framework),
    );
    let supported = match target.as_str() {
        "pytorch" => golden == "pytorch",
        "mindspore" | "mindtorch" => golden == "pytorch" || golden == "mindspore",
        _ => false,
    };
    if supported {
        return Ok(());
    }
    Err(ConvertError::Usage(format!(
        "cannot compare a {target} target ({}) with a {golden} golden ({}): msprobe compares a \
         pytorch target with a pytorch golden, and a mindspore or mindtorch target with a pytorch \
         or mindspore golden",
        npu_dump.dir.display(),
        bench_dump.dir.display()
    )))
}

fn framework_family(f: &str) -> &str {
    match f {
        "mindtorch" => "mindspore",
        "" => "pytorch",
        other => other,
    }
}

fn link(
    npu: &mut Graph,
    bench: &mut Graph,
    n: usize,
    b: usize,
    npu_link: Vec<String>,
    bench_link: Vec<String>,
) {
    npu.nodes[n].set_matched(Some(b));
    npu.nodes[n].set_matched_link(npu_link);
    bench.nodes[b].set_matched(Some(n));
    bench.nodes[b].set_matched_link(bench_link);
}

fn match_default(npu: &mut Graph, bench: &mut Graph) {
    for n in npu.bfs() {
        let Some(b) = bench.get(npu.id(n)) else {
            continue;
        };
        if bench.nodes[b].matched().is_some() {
            continue;
        }
        if npu.ancestors(n) != bench.ancestors(b) {
            continue;
        }
        // The link, on both sides, is the common path and the common id: each node's own
        // path, made when the row is written.
        link(npu, bench, n, b, Vec::new(), Vec::new());
        npu.nodes[n].matched_link_is_path = true;
        bench.nodes[b].matched_link_is_path = true;
    }
}

/// The fuzzy key of an API: call counters and `_rank<N>` suffixes removed.
fn fuzzy_key(id: &str) -> String {
    let segs: Vec<&str> = id.split('.').collect();
    let mut kept: Vec<String> = Vec::with_capacity(segs.len());
    for (i, s) in segs.iter().enumerate() {
        let inner = i > 0 && i + 1 < segs.len();
        if inner && !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let s = match s.rfind("_rank") {
            Some(p) if s[p + 5..].bytes().all(|b| b.is_ascii_digit()) && p + 5 < s.len() => &s[..p],
            _ => s,
        };
        kept.push(s.to_string());
    }
    kept.join(".")
}

fn api_children_keys(g: &Graph, n: usize) -> HashMap<String, usize> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut out = HashMap::new();
    for c in g.children(n) {
        if g.nodes[c].op != NodeOp::FunctionApi {
            continue;
        }
        let base = fuzzy_key(g.id(c));
        let k = counts.entry(base.clone()).or_insert(0);
        *k += 1;
        out.insert(format!("{base}.{k}"), c);
    }
    out
}

fn match_fuzzy(npu: &mut Graph, bench: &mut Graph) {
    for n in npu.bfs() {
        if npu.nodes[n].op == NodeOp::FunctionApi {
            continue;
        }
        let Some(b) = bench.get(npu.id(n)) else {
            continue;
        };
        let mut nl = npu.ancestors(n);
        nl.push(bench.id(b).to_string());
        let mut bl = bench.ancestors(b);
        bl.push(npu.id(n).to_string());
        link(npu, bench, n, b, nl, bl);
        let bench_keys = api_children_keys(bench, b);
        let npu_keys = api_children_keys(npu, n);
        let mut pairs: Vec<(usize, usize)> = npu_keys
            .iter()
            .filter_map(|(k, &nc)| bench_keys.get(k).map(|&bc| (nc, bc)))
            .collect();
        pairs.sort();
        for (nc, bc) in pairs {
            let mut nl = npu.ancestors(nc);
            nl.push(bench.id(bc).to_string());
            let mut bl = bench.ancestors(bc);
            bl.push(npu.id(nc).to_string());
            link(npu, bench, nc, bc, nl, bl);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuzzy_keys_drop_counters() {
        assert_eq!(
            fuzzy_key("Functional.linear.5.forward"),
            "Functional.linear.forward"
        );
        assert_eq!(
            fuzzy_key("Torch.matmul_rank1.3.forward"),
            "Torch.matmul.forward"
        );
        assert_eq!(
            fuzzy_key("Tensor.__add__.0.backward"),
            "Tensor.__add__.backward"
        );
    }
}
