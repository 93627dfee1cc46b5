//! Parallel merge (`--rank_size --tp --pp [--vpp] [--order]`, msprobe's `GraphMerger`): the
//! graphs of the ranks of a Megatron-style run are merged into one graph per data-parallel
//! replica, so that runs with different parallel layouts can be viewed and compared.
//!
//! - [`params`]: the checks of a side's layout ([`crate::parallel`]) against its ranks,
//!   Megatron's default rank groups;
//! - [`forest`]: the rank graphs while they are merged (shared nodes, ordered id tables);
//! - [`tp`]: tensor-parallel merging of statistics; [`pp`]: pipeline (and virtual pipeline)
//!   merging of the hierarchy;
//! - [`json_out`]: `--file_type json`.
//!
//! The strategy follows msprobe's `_select_strategy`: TP only, PP (or VPP) only, TP then PP
//! inside one model replica (`tp·pp = rank_size`), or PP per pipeline then TP per tensor group
//! (with data parallelism). The merged graph of each replica is written under the first rank of
//! its group, with `parallel_merge_info` notes; no communication links are computed.

pub(crate) mod forest;
pub(crate) mod json_out;
pub(crate) mod merger;
pub mod params;
pub(crate) mod pp;
pub(crate) mod tp;

use crate::error::ConvertError;
use crate::graph::Graph;
use crate::node::NodeOp;
use crate::parallel::ParallelParams;
use forest::{Forest, MGraph};
use merger::Merger;

const ALL_RANKS: &str = "Apis_Between_Modules_All_Ranks";
const APIS: &str = "Apis_Between_Modules";

impl Merger<'_> {
    /// `merge_graph_api_collection`: every rank's `Apis_Between_Modules.k` goes under one
    /// `Apis_Between_Modules_All_Ranks.k` of the first graph, renamed
    /// `Apis_Between_Modules_Rank<r>.k`; other ranks' APIs get `_rank<r>` in their names.
    fn merge_api_collection(&mut self, graphs: &mut [MGraph]) {
        let Some((main, others)) = graphs.split_first_mut() else {
            return;
        };
        let f = &mut self.forest;
        let root = main.root;
        let children = f.nodes[root].children.clone();
        let mut new_children = Vec::with_capacity(children.len());
        for n in children {
            let id = f.nodes[n].id.clone();
            if id.starts_with(ALL_RANKS) {
                new_children.push(n);
                for o in others.iter() {
                    let Some(on) = o.map.get(&id) else {
                        continue;
                    };
                    let subs = f.nodes[on].children.clone();
                    for &s in &subs {
                        f.nodes[s].parent = Some(n);
                        let sid = f.nodes[s].id.clone();
                        main.map.insert(&sid, s);
                        for ss in f.nodes[s].children.clone() {
                            let ssid = f.nodes[ss].id.clone();
                            main.map.insert(&ssid, ss);
                        }
                    }
                    f.nodes[n].children.extend(subs);
                }
            } else if id.starts_with(APIS) {
                let all = f.add_accumulated(main, NodeOp::ApiCollection, ALL_RANKS);
                f.nodes[all].parent = Some(root);
                new_children.push(all);
                let last = id.rsplit('.').next().unwrap_or("").to_string();
                let new_id = format!("{APIS}_Rank{}.{last}", main.rank);
                f.nodes[n].id = new_id.clone();
                f.set_children(all, vec![n]);
                f.nodes[n].parent = Some(all);
                main.map.insert(&new_id, n);
                main.map.remove(&id);
                for o in others.iter() {
                    let Some(on) = o.map.get(&id) else {
                        continue;
                    };
                    let oid = format!("{APIS}_Rank{}.{last}", o.rank);
                    f.nodes[on].id = oid.clone();
                    main.map.insert(&oid, on);
                    for s in f.nodes[on].children.clone() {
                        let old = f.nodes[s].id.clone();
                        let mut parts: Vec<String> = old.split('.').map(str::to_string).collect();
                        if parts.len() >= 2 {
                            parts[1].push_str(&format!("_rank{}", o.rank));
                        }
                        let new = parts.join(".");
                        f.rename_keys(s, &old, &new);
                        f.nodes[s].id = new.clone();
                        main.map.insert(&new, s);
                    }
                    f.nodes[all].children.push(on);
                    f.nodes[on].parent = Some(all);
                }
            } else {
                new_children.push(n);
            }
        }
        f.set_children(root, new_children);
    }

    /// `sort_merged_api_collection`: the rank collections of each `…_All_Ranks.k` by rank.
    fn sort_api_collections(&mut self, g: &MGraph) {
        let f = &mut self.forest;
        for n in f.nodes[g.root].children.clone() {
            if f.nodes[n].op == NodeOp::ApiCollection && f.nodes[n].id.starts_with(ALL_RANKS) {
                let mut subs = f.nodes[n].children.clone();
                subs.sort_by_key(|&s| rank_of_collection(&f.nodes[s].id));
                f.set_children(n, subs);
            }
        }
    }

    /// Merges the rank graphs of one side (`GraphMerger.merge_graph`).
    fn merge(&mut self, graphs: Vec<MGraph>) -> Result<Vec<MGraph>, ConvertError> {
        let p = self.params;
        let mut graphs = graphs;
        if p.tp == 1 && p.pp == 1 && p.rank_size == 1 {
            self.merge_api_collection(&mut graphs);
            return Ok(graphs);
        }
        let tp_only = p.tp == p.rank_size || (p.pp != p.rank_size && p.pp == 1);
        let pp_only = !tp_only && (p.pp == p.rank_size || p.tp == 1);
        if tp_only {
            let groups = self.tp_groups(&graphs)?;
            let mut out = Vec::new();
            for mut group in take_groups(graphs, &groups)? {
                self.merge_api_collection(&mut group);
                out.extend(self.merge_tp_graphs(group, &[]));
            }
            return Ok(out);
        }
        if pp_only {
            let groups = self.pp_groups(&graphs)?;
            let mut out = Vec::new();
            for mut group in take_groups(graphs, &groups)? {
                self.merge_api_collection(&mut group);
                out.extend(self.merge_pp_graphs(group));
            }
            return Ok(out);
        }
        let pp_groups = self.pp_groups(&graphs)?;
        let tp_groups = self.tp_groups(&graphs)?;
        let mapping: Vec<(i64, Vec<i64>)> = tp_groups
            .iter()
            .skip(1)
            .filter_map(|g| g.split_first().map(|(a, rest)| (*a, rest.to_vec())))
            .collect();
        if p.tp * p.pp == p.rank_size {
            // One model replica: TP across the merged pipelines.
            self.merge_api_collection(&mut graphs);
            let mut pp_results = Vec::new();
            for group in take_groups(graphs, &pp_groups)? {
                pp_results.extend(self.merge_pp_graphs(group));
            }
            let out = self.merge_tp_graphs(pp_results, &mapping);
            if let Some(first) = out.first() {
                self.sort_api_collections(first);
            }
            return Ok(out);
        }
        // Data parallel too: pipelines first, then each TP group of pipeline results.
        let mut pp_results: Vec<MGraph> = Vec::new();
        for mut group in take_groups(graphs, &pp_groups)? {
            self.merge_api_collection(&mut group);
            let merged = self.merge_pp_graphs(group);
            if let Some(first) = merged.into_iter().next() {
                match pp_results.iter_mut().find(|g| g.rank == first.rank) {
                    Some(slot) => *slot = first,
                    None => pp_results.push(first),
                }
            }
        }
        let mut out = Vec::new();
        for tp_group in &tp_groups {
            let mut list: Vec<MGraph> = Vec::new();
            for r in tp_group {
                if let Some(i) = pp_results.iter().position(|g| g.rank == *r) {
                    list.push(pp_results.swap_remove(i));
                }
            }
            if list.is_empty() {
                continue;
            }
            self.merge_api_collection(&mut list);
            let merged = self.merge_tp_graphs(list, &mapping);
            if let Some(first) = merged.first() {
                self.sort_api_collections(first);
            }
            out.extend(merged);
        }
        Ok(out)
    }
}

/// The rank number in `Apis_Between_Modules_Rank<r>.k`.
fn rank_of_collection(id: &str) -> Option<i64> {
    let rest = &id[id.find("_Rank")? + 5..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// `split_graph_results_by_groups`: the rank graphs of each group, in group order.
fn take_groups(graphs: Vec<MGraph>, groups: &[Vec<i64>]) -> Result<Vec<Vec<MGraph>>, ConvertError> {
    let mut slots: Vec<Option<MGraph>> = graphs.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(groups.len());
    for group in groups {
        let mut list = Vec::with_capacity(group.len());
        for r in group {
            let slot = slots
                .iter_mut()
                .find(|s| s.as_ref().is_some_and(|g| g.rank == *r));
            match slot.and_then(Option::take) {
                Some(g) => list.push(g),
                None => {
                    return Err(ConvertError::Usage(format!(
                    "rank group {group:?} names rank {r}, which has no rank{r} folder (or is in \
                         two groups)"
                )))
                }
            }
        }
        out.push(list);
    }
    Ok(out)
}

/// One side's rank graphs merged: the merged graph of each data-parallel replica.
pub(crate) struct Merged<'a> {
    merger: Merger<'a>,
    /// The merged graphs, in msprobe's order.
    pub graphs: Vec<MGraph>,
}

impl Merged<'_> {
    /// A merged graph as a plain graph.
    pub fn to_graph(&self, g: &MGraph) -> Graph {
        self.merger.forest.to_graph(g)
    }
}

/// Merges one side's rank graphs, each given with its rank and its micro-step count; a merged
/// graph's `dump` is the index in `ranks` of the rank graph whose dump it takes.
pub(crate) fn merge_ranks(
    ranks: Vec<(Graph, i64, i64)>,
    params: &ParallelParams,
) -> Result<Merged<'_>, ConvertError> {
    let mut merger = Merger {
        forest: Forest::default(),
        params,
    };
    let graphs = ranks
        .into_iter()
        .enumerate()
        .map(|(i, (graph, rank, micro_steps))| merger.forest.add_graph(graph, rank, micro_steps, i))
        .collect();
    let graphs = merger.merge(graphs)?;
    Ok(Merged { merger, graphs })
}

/// `_handle_api_collection_index` for merged graphs: each `Apis_Between_Modules_Rank<r>.k`
/// takes the worst of its APIs, then `…_All_Ranks.k` the worst of those.
pub(crate) fn all_ranks_index(g: &mut Graph) {
    let worst = |g: &Graph, n: usize| {
        g.children(n)
            .map(|c| g.nodes[c].precision_index().unwrap_or(0.0))
            .fold(0.0, f64::max)
    };
    for n in g.children(g.root).collect::<Vec<_>>() {
        if g.nodes[n].op == NodeOp::ApiCollection && g.id(n).starts_with(ALL_RANKS) {
            for s in g.children(n).collect::<Vec<_>>() {
                let w = worst(g, s);
                g.nodes[s].set_precision_index(Some(w));
            }
            let w = worst(g, n);
            g.nodes[n].set_precision_index(Some(w));
        }
    }
}

/// msprobe's `paging_by_micro_step(graph_b)` on merged graphs: root children get their batch
/// (and their matched golden nodes too); nodes without one inherit their parent's.
pub(crate) fn paging(npu: &mut Graph, bench: &mut Graph) -> i64 {
    if let Some(n) = npu.micro_step_num {
        return n + 1;
    }
    let mut batch = 0i64;
    let mut seen_backward = false;
    let mut batches = 0i64;
    for c in npu.children(npu.root).collect::<Vec<_>>() {
        let node = &npu.nodes[c];
        if node.op == NodeOp::Module {
            let id = npu.id(c);
            if id.contains(".forward.") && seen_backward {
                batch += 1;
                seen_backward = false;
            } else if id.contains(".backward.") {
                seen_backward = true;
            }
        }
        batches = batches.max(batch + 1);
        npu.nodes[c].set_micro_step_id(Some(batch));
        if let Some(last) = npu.nodes[c].matched_link().last() {
            if let Some(b) = bench.get(last) {
                bench.nodes[b].set_micro_step_id(Some(batch));
            }
        }
    }
    inherit(npu);
    let root = bench.root;
    for c in bench.children(root).collect::<Vec<_>>() {
        if bench.nodes[c].micro_step_id().is_none() {
            let v = bench
                .id(c)
                .rsplit('.')
                .next()
                .and_then(|s| s.parse::<i64>().ok())
                .unwrap_or(0);
            bench.nodes[c].set_micro_step_id(Some(v));
        }
    }
    inherit(bench);
    batches
}

fn inherit(g: &mut Graph) {
    let mut stack = vec![g.root];
    while let Some(n) = stack.pop() {
        let ms = g.nodes[n].micro_step_id();
        for c in g.children(n).collect::<Vec<_>>() {
            if g.nodes[c].micro_step_id().is_none() {
                g.nodes[c].set_micro_step_id(ms);
            }
            stack.push(c);
        }
    }
}
