//! Pipeline-parallel merging (msprobe's `PPMerger` and `VPPMerger`): the stages of a pipeline
//! each hold some of the layers; layers present on every stage with different inputs and
//! outputs are the split ones, and the other stages' copies are moved next to the first
//! stage's, renumbered after it (`layers.0` of stage 2 becomes `layers.<n>`), their APIs marked
//! `_rank<r>`. With virtual pipeline chunks (`--vpp`), all chunks are then folded into chunk 0.

use super::forest::{layers_match, layers_sub_all, mark_match, unmark, Forest, MGraph};
use super::merger::Merger;
use crate::node::NodeOp;

const UNMERGED_MODULES: [&str; 2] = ["clip_grad", "optimizer"];

impl Merger<'_> {
    /// PP groups: each rank's first send/isend target (or batch_isend_irecv peer), chained;
    /// Megatron's default groups when that does not fit `--pp`.
    pub(crate) fn pp_groups(
        &self,
        graphs: &[MGraph],
    ) -> Result<Vec<Vec<i64>>, crate::error::ConvertError> {
        let f = &self.forest;
        let mut mapping: Vec<(i64, i64)> = Vec::new();
        for g in graphs {
            let rank = g.rank;
            let mut target = None;
            for n in g.map.values() {
                let node = &f.nodes[n];
                if !node.id.starts_with("Distributed.") {
                    continue;
                }
                if node.id.contains(".batch_isend_irecv.") {
                    for (op, peer) in batch_p2p(node) {
                        if let Some(p) = peer {
                            if p != rank && op.as_deref() == Some("isend") {
                                target = Some(p);
                                break;
                            }
                        }
                    }
                } else if node.id.contains(".send.") || node.id.contains(".isend.") {
                    let key = format!("{}.input.dst", node.id);
                    let dst = node
                        .input
                        .iter()
                        .find(|(k, _)| *k == key)
                        .and_then(|(_, it)| it.get("value"))
                        .and_then(|v| match v {
                            graph_ascend_dump::PyVal::Int(i) => Some(*i),
                            _ => None,
                        });
                    if let Some(d) = dst {
                        target = Some(d);
                        break;
                    }
                }
                if target.is_some() {
                    break;
                }
            }
            if let Some(t) = target {
                match mapping.iter_mut().find(|(r, _)| *r == rank) {
                    Some(e) => e.1 = t,
                    None => mapping.push((rank, t)),
                }
            }
        }
        // Chains of the send mapping, each started at a rank not yet visited.
        let mut visited = std::collections::HashSet::new();
        let mut groups: Vec<Vec<i64>> = Vec::new();
        for &(start, _) in &mapping {
            if visited.contains(&start) {
                continue;
            }
            let mut chain = Vec::new();
            let mut cur = start;
            while let Some(&(_, next)) = mapping.iter().find(|(r, _)| *r == cur) {
                if !visited.insert(cur) {
                    break;
                }
                chain.push(cur);
                cur = next;
            }
            if !chain.is_empty() {
                groups.push(chain);
            }
        }
        if groups.is_empty() || groups[0].len() as i64 != self.params.pp {
            let (_, pp) = super::params::default_groups(self.params)?;
            return Ok(pp);
        }
        Ok(groups)
    }

    /// `merge_pp_graphs` (and, with `--vpp` > 1, the VPP chunk folding).
    pub(crate) fn merge_pp_graphs(&mut self, mut graphs: Vec<MGraph>) -> Vec<MGraph> {
        if graphs.len() < 2 {
            return graphs;
        }
        let others = graphs.split_off(1);
        let mut main = graphs.pop().unwrap_or_else(|| others[0].clone());
        let root = main.root;
        // msprobe iterates the root's child list object it started with, which grows while
        // split layers are appended, until a sort replaces it.
        let gen0 = self.forest.nodes[root].children_gen;
        let mut snapshot = self.forest.nodes[root].children.clone();
        let mut i = 0;
        loop {
            if self.forest.nodes[root].children_gen == gen0 {
                snapshot = self.forest.nodes[root].children.clone();
            }
            let Some(&n) = snapshot.get(i) else {
                break;
            };
            i += 1;
            let node = &self.forest.nodes[n];
            if node.op == NodeOp::Module && !UNMERGED_MODULES.contains(&node.id.as_str()) {
                self.merge_pp_nodes(&mut main, n, &others);
                self.sort_pp_nodes(&mut main, n);
            }
        }
        let mut all = vec![main];
        all.extend(others);
        self.merge_root_unique(&mut all);
        let mut main = all.swap_remove(0);
        if self.params.vpp > 1 {
            self.merge_vpp_data(&main);
            self.merge_vpp_chunks(&mut main);
        }
        vec![main]
    }

    /// `_merge_nodes`.
    fn merge_pp_nodes(&mut self, main: &mut MGraph, n: usize, others: &[MGraph]) {
        let id = self.forest.nodes[n].id.clone();
        let mut other_nodes = Vec::new();
        for g in others {
            match g.map.get(&id) {
                Some(o) => other_nodes.push(o),
                None => return,
            }
        }
        if !other_nodes.is_empty() {
            let (pin, pout) = super::tp::param_data_diff(&self.forest, n, &other_nodes, true);
            let mut split = !pin.is_empty() && !pout.is_empty() && layers_match(&id).is_some();
            if id.contains(".backward.") {
                let fid = id.replace(".backward.", ".forward.");
                if let Some(fw) = main.map.get(&fid) {
                    if self.forest.nodes[fw].pp_merged {
                        split = true;
                    }
                }
            }
            if split {
                self.forest.nodes[n].pp_merged = true;
                let Some(up) = self.forest.nodes[n].parent else {
                    return;
                };
                for &o in &other_nodes {
                    let r = self.forest.nodes[o].rank;
                    mark(&mut self.forest, o, r);
                    add_to_graph(&self.forest, main, o);
                    self.forest.nodes[o].parent = Some(up);
                    self.forest.nodes[up].children.push(o);
                }
                return;
            } else if pin.is_empty() && !pout.is_empty() && id.contains(".forward.") {
                let last = other_nodes[other_nodes.len() - 1];
                self.forest.nodes[n].output = self.forest.nodes[last].output.clone();
            } else if !pin.is_empty() && pout.is_empty() && id.contains(".backward.") {
                let last = other_nodes[other_nodes.len() - 1];
                self.forest.nodes[n].input = self.forest.nodes[last].input.clone();
            }
            self.merge_other_unique(main, n, &other_nodes);
        }
        let mut k = 0;
        while let Some(&c) = self.forest.nodes[n].children.get(k) {
            k += 1;
            if self.forest.nodes[c].op == NodeOp::Module {
                self.merge_pp_nodes(main, c, others);
            }
        }
    }

    /// `_merge_other_unique_nodes`: children only one other rank has are moved under `n`.
    fn merge_other_unique(&mut self, main: &mut MGraph, n: usize, other_nodes: &[usize]) {
        let f = &self.forest;
        let lists: Vec<Vec<usize>> = std::iter::once(n)
            .chain(other_nodes.iter().copied())
            .map(|x| f.nodes[x].children.clone())
            .collect();
        // Each list as an ordered id → node table (a later duplicate id wins, in place).
        let tables: Vec<Vec<(String, usize)>> = lists
            .iter()
            .map(|l| {
                let mut t: Vec<(String, usize)> = Vec::new();
                for &c in l {
                    let id = f.nodes[c].id.clone();
                    match t.iter_mut().find(|(k, _)| *k == id) {
                        Some(e) => e.1 = c,
                        None => t.push((id, c)),
                    }
                }
                t
            })
            .collect();
        let mut unique: Vec<usize> = Vec::new();
        for (i, t) in tables.iter().enumerate().skip(1) {
            for (id, c) in t {
                let elsewhere = tables
                    .iter()
                    .enumerate()
                    .any(|(j, o)| j != i && o.iter().any(|(k, _)| k == id));
                if !elsewhere {
                    unique.push(*c);
                }
            }
        }
        for u in unique {
            let r = self.forest.nodes[u].rank;
            mark(&mut self.forest, u, r);
            add_to_graph(&self.forest, main, u);
            self.forest.nodes[n].children.push(u);
            self.forest.nodes[u].parent = Some(n);
        }
    }

    /// `_sort_nodes`: marked nodes are ordered after (forward) or before (backward) their
    /// siblings by rank, and renamed.
    fn sort_pp_nodes(&mut self, main: &mut MGraph, start: usize) {
        let mut stack = vec![start];
        while let Some(node) = stack.pop() {
            let id = self.forest.nodes[node].id.clone();
            if mark_match(&id).is_some() {
                if let Some(parent) = self.forest.nodes[node].parent {
                    let forward = id.contains(".forward.") || id.contains(".forward%");
                    let siblings = self.forest.nodes[parent].children.clone();
                    let (mut marked, unmarked): (Vec<usize>, Vec<usize>) = siblings
                        .into_iter()
                        .partition(|&s| mark_match(&self.forest.nodes[s].id).is_some());
                    let key = |s: usize| {
                        let (_, pos, rank) =
                            mark_match(&self.forest.nodes[s].id).unwrap_or((0, 0, 0));
                        if forward {
                            (rank, pos)
                        } else {
                            (-rank, pos)
                        }
                    };
                    marked.sort_by_key(|&s| key(s));
                    let new: Vec<usize> = if forward {
                        unmarked.iter().chain(&marked).copied().collect()
                    } else {
                        marked.iter().chain(&unmarked).copied().collect()
                    };
                    let mut index = -1i64;
                    let walk: Vec<usize> = if forward {
                        new.clone()
                    } else {
                        new.iter().rev().copied().collect()
                    };
                    for item in walk {
                        let iid = &self.forest.nodes[item].id;
                        if layers_match(iid).is_some() {
                            index += 1;
                        }
                        if mark_match(iid).is_some() {
                            self.forest.nodes[item].pp_index = Some(index);
                        }
                    }
                    for &item in &marked {
                        update_node_id(&mut self.forest, main, item);
                    }
                    self.forest.set_children(parent, new);
                }
            }
            stack.extend(self.forest.nodes[node].children.iter().copied());
        }
    }

    /// `_merge_root_unique_subnodes`: when layers hang right under the root, the root children
    /// only other stages have are appended and renumbered.
    fn merge_root_unique(&mut self, graphs: &mut [MGraph]) {
        if graphs.len() < 2 {
            return;
        }
        let root = graphs[0].root;
        let f = &self.forest;
        if !f.nodes[root]
            .children
            .iter()
            .any(|&c| layers_match(&f.nodes[c].id).is_some())
        {
            return;
        }
        let main_ids: std::collections::HashSet<String> = f.nodes[root]
            .children
            .iter()
            .map(|&c| f.nodes[c].id.clone())
            .collect();
        let mut to_merge = Vec::new();
        for g in &graphs[1..] {
            for &c in &f.nodes[g.root].children {
                let id = &f.nodes[c].id;
                if !main_ids.contains(id) && !id.starts_with("Apis_Between_Modules") {
                    to_merge.push(c);
                }
            }
        }
        if to_merge.is_empty() {
            return;
        }
        let (main, _) = graphs.split_at_mut(1);
        let main = &mut main[0];
        for c in to_merge {
            let r = self.forest.nodes[c].rank;
            mark(&mut self.forest, c, r);
            add_to_graph(&self.forest, main, c);
            self.forest.nodes[c].parent = Some(root);
            self.forest.nodes[root].children.push(c);
        }
        let children = self.forest.nodes[root].children.clone();
        let (mut marked, unmarked): (Vec<usize>, Vec<usize>) = children
            .into_iter()
            .partition(|&s| mark_match(&self.forest.nodes[s].id).is_some());
        marked.sort_by_key(|&s| {
            let (_, pos, rank) = mark_match(&self.forest.nodes[s].id).unwrap_or((0, 0, 0));
            (rank, pos)
        });
        let new: Vec<usize> = unmarked.iter().chain(&marked).copied().collect();
        self.forest.set_children(root, new);
        let mut layer_idx = unmarked
            .iter()
            .filter(|&&c| layers_match(&self.forest.nodes[c].id).is_some())
            .count() as i64
            - 1;
        for c in marked {
            if layers_match(&self.forest.nodes[c].id).is_some() {
                layer_idx += 1;
                self.forest.nodes[c].pp_index = Some(layer_idx);
            }
            update_node_id(&mut self.forest, main, c);
        }
    }

    /// `_merge_vpp_data`: chunk 0's forward modules take the last chunk's outputs, backward ones
    /// its inputs.
    fn merge_vpp_data(&mut self, g: &MGraph) {
        let last = (self.params.vpp - 1).to_string();
        let f = &self.forest;
        let modules: Vec<usize> = f.nodes[g.root]
            .children
            .iter()
            .rev()
            .copied()
            .filter(|&c| {
                let parts: Vec<&str> = f.nodes[c].id.split('.').collect();
                parts.len() >= 2 && (parts[1] == "0" || parts[1] == last)
            })
            .collect();
        let mut stack = modules;
        while let Some(cur) = stack.pop() {
            let node = &self.forest.nodes[cur];
            if node.pp_merged || node.pp_index.is_some() || node.op != NodeOp::Module {
                continue;
            }
            let forward = forward_suffix(&node.id);
            stack.extend(node.children.iter().rev().copied());
            let target_id = replace_vpp_id(&node.id, &last);
            let Some(t) = g.map.get(&target_id) else {
                continue;
            };
            let (tid, cid) = (self.forest.nodes[t].id.clone(), node.id.clone());
            if t != cur {
                self.forest.shared_items.push((cur, t, forward));
            }
            if forward {
                let mut out = self.forest.nodes[t].output.clone();
                rename(&mut out, &tid, &cid);
                self.forest.nodes[cur].output = out;
            } else {
                let mut inp = self.forest.nodes[t].input.clone();
                rename(&mut inp, &tid, &cid);
                self.forest.nodes[cur].input = inp;
            }
        }
    }

    /// `_merge_vpp_chunks`: the layers of chunks 1… move into chunk 0 and are renumbered; the
    /// other chunks' modules disappear.
    fn merge_vpp_chunks(&mut self, g: &mut MGraph) {
        let f = &self.forest;
        let chunk0: Vec<usize> = f.nodes[g.root]
            .children
            .iter()
            .rev()
            .copied()
            .filter(|&c| {
                let parts: Vec<&str> = f.nodes[c].id.split('.').collect();
                parts.len() >= 2 && parts[1] == "0"
            })
            .collect();
        if chunk0.is_empty() {
            return;
        }
        let mut stack = chunk0;
        let mut holders: Vec<usize> = Vec::new();
        while let Some(cur) = stack.pop() {
            let node = &self.forest.nodes[cur];
            let parent_listed = node.parent.is_some_and(|p| {
                holders
                    .iter()
                    .any(|&h| self.forest.nodes[h].id == self.forest.nodes[p].id)
            });
            if node.pp_merged || (node.pp_index.is_some() && !parent_listed) {
                if let Some(p) = node.parent {
                    let pid = &self.forest.nodes[p].id;
                    match holders
                        .iter()
                        .position(|&h| self.forest.nodes[h].id == *pid)
                    {
                        Some(i) => holders[i] = p,
                        None => holders.push(p),
                    }
                }
                continue;
            }
            stack.extend(node.children.iter().rev().copied());
        }
        for node in holders {
            let forward = forward_suffix(&self.forest.nodes[node].id);
            for chunk in 1..self.params.vpp {
                let tid = replace_vpp_id(&self.forest.nodes[node].id, &chunk.to_string());
                let Some(t) = g.map.get(&tid) else {
                    continue;
                };
                let moved = self.forest.nodes[t].children.clone();
                if forward {
                    self.forest.nodes[node]
                        .children
                        .extend(moved.iter().copied());
                } else {
                    let mut new = moved.clone();
                    new.extend(self.forest.nodes[node].children.iter().copied());
                    self.forest.set_children(node, new);
                }
                for &m in &moved {
                    self.forest.nodes[m].parent = Some(node);
                }
                let ancestors: Vec<String> = self
                    .forest
                    .ancestors(t)
                    .into_iter()
                    .map(str::to_string)
                    .collect();
                if ancestors.len() < 2 {
                    continue;
                }
                for a in &ancestors[1..] {
                    g.map.remove(a);
                }
                let root = g.root;
                let kept: Vec<usize> = self.forest.nodes[root]
                    .children
                    .iter()
                    .copied()
                    .filter(|&c| self.forest.nodes[c].id != ancestors[1])
                    .collect();
                self.forest.set_children(root, kept);
            }
            let children = self.forest.nodes[node].children.clone();
            self.sort_layers(&children, g, forward);
        }
    }

    /// `_sort_layers`: moved layers get chunk 0 and consecutive layer numbers.
    fn sort_layers(&mut self, list: &[usize], g: &mut MGraph, forward: bool) {
        let order: Vec<usize> = if forward {
            list.to_vec()
        } else {
            list.iter().rev().copied().collect()
        };
        let mut index = -1i64;
        for node in order {
            let id = self.forest.nodes[node].id.clone();
            let m = layers_match(&id);
            if m.is_some() {
                index += 1;
            }
            let parts: Vec<&str> = id.split('.').collect();
            if parts.len() < 2 || parts[1] == "0" {
                continue;
            }
            let mut prefix = String::new();
            let new_id = match m {
                Some((start, p, _, end)) => {
                    prefix = format!("{}{}{index}.", &id[..start], &id[start..p]);
                    prefix = replace_vpp_id(&prefix, "0");
                    format!("{prefix}{}", &id[end..])
                }
                None => replace_vpp_id(&id, "0"),
            };
            self.rename_node(g, node, &new_id);
            let mut stack: Vec<usize> = self.forest.nodes[node].children.clone();
            while let Some(cur) = stack.pop() {
                if self.forest.nodes[cur].op != NodeOp::Module {
                    continue;
                }
                stack.extend(self.forest.nodes[cur].children.iter().rev().copied());
                let cid = self.forest.nodes[cur].id.clone();
                let new_cur = match layers_match(&cid) {
                    Some((_, _, _, e)) => format!("{prefix}{}", &cid[e..]),
                    None => replace_vpp_id(&cid, "0"),
                };
                self.rename_node(g, cur, &new_cur);
            }
        }
    }

    fn rename_node(&mut self, g: &mut MGraph, n: usize, new_id: &str) {
        let old = self.forest.nodes[n].id.clone();
        g.map.remove(&old);
        self.forest.rename_keys(n, &old, new_id);
        self.forest.nodes[n].id = new_id.to_string();
        g.map.insert(new_id, n);
    }
}

/// `.forward.<N>` at the end of an id.
fn forward_suffix(id: &str) -> bool {
    match id.rsplit_once(".forward.") {
        Some((_, n)) => !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()),
        None => false,
    }
}

/// `_replace_vpp_id`: the chunk number (second segment) replaced.
fn replace_vpp_id(s: &str, chunk: &str) -> String {
    let mut parts: Vec<&str> = s.split('.').collect();
    if parts.len() < 2 || parts[1].is_empty() || !parts[1].bytes().all(|b| b.is_ascii_digit()) {
        return s.to_string();
    }
    parts[1] = chunk;
    parts.join(".")
}

fn rename(items: &mut [(String, graph_ascend_dump::Item)], old: &str, new: &str) {
    if old == new {
        return;
    }
    for (k, _) in items.iter_mut() {
        if k.contains(old) {
            *k = k.replace(old, new);
        }
    }
}

/// The `(op, peer)` of each p2p operation of a `batch_isend_irecv` (its `output[0]` list).
fn batch_p2p(node: &super::forest::MNode) -> Vec<(Option<String>, Option<i64>)> {
    let prefix = format!("{}.output.0.", node.id);
    let mut out: Vec<(String, Option<String>, Option<i64>)> = Vec::new();
    for (k, it) in &node.output {
        let Some(rest) = k.strip_prefix(&prefix) else {
            continue;
        };
        let (idx, field) = rest.split_once('.').unwrap_or((rest, ""));
        let slot = match out.iter().position(|(i, _, _)| i == idx) {
            Some(p) => p,
            None => {
                out.push((idx.to_string(), None, None));
                out.len() - 1
            }
        };
        // Leaf dicts of the p2p list carry `op`/`peer` themselves, or as sub-items.
        for (name, v) in [
            (
                "op",
                it.get("op")
                    .or_else(|| (field == "op").then(|| it.get("value")).flatten()),
            ),
            (
                "peer",
                it.get("peer")
                    .or_else(|| (field == "peer").then(|| it.get("value")).flatten()),
            ),
        ] {
            match (name, v) {
                ("op", Some(graph_ascend_dump::PyVal::Str(s))) => out[slot].1 = Some(s.clone()),
                ("peer", Some(graph_ascend_dump::PyVal::Int(i))) => out[slot].2 = Some(*i),
                _ => {}
            }
        }
    }
    out.into_iter().map(|(_, op, peer)| (op, peer)).collect()
}

/// `_mark_node_id_position_rank`: `<id>%<position among its siblings>%<rank>`, recursively.
fn mark(f: &mut Forest, n: usize, rank: i64) {
    let mut stack = vec![n];
    while let Some(x) = stack.pop() {
        let id = f.nodes[x].id.clone();
        let position = f.nodes[x]
            .parent
            .and_then(|p| {
                f.nodes[p]
                    .children
                    .iter()
                    .position(|&s| f.nodes[s].id == id)
            })
            .unwrap_or(0);
        f.nodes[x].id = format!("{id}%{position}%{rank}");
        stack.extend(f.nodes[x].children.iter().rev().copied());
    }
}

/// `_add_node_to_main_graph`: a subtree's ids into the main id table (existing ids kept).
fn add_to_graph(f: &Forest, g: &mut MGraph, n: usize) {
    let mut stack = vec![n];
    while let Some(x) = stack.pop() {
        if !g.map.contains(&f.nodes[x].id) {
            g.map.insert(&f.nodes[x].id, x);
        }
        stack.extend(f.nodes[x].children.iter().rev().copied());
    }
}

/// `_update_node_id`: marks become layer numbers (modules) or `_rank<r>` (APIs).
fn update_node_id(f: &mut Forest, g: &mut MGraph, start: usize) {
    let mut stack: Vec<(usize, String)> = vec![(start, String::new())];
    while let Some((n, mut pp_index)) = stack.pop() {
        let id = f.nodes[n].id.clone();
        if g.map.contains(&id) {
            g.map.remove(&id);
            let old = unmark(&id).to_string();
            let mut new = id.clone();
            if f.nodes[n].op == NodeOp::Module {
                if layers_match(&id).is_some() && mark_match(&id).is_some() {
                    if let Some(p) = f.nodes[n].pp_index {
                        pp_index = p.to_string();
                    }
                    new = layers_sub_all(&id, &pp_index);
                }
            } else {
                let rank = id.rsplit('%').next().unwrap_or("").to_string();
                let mut parts: Vec<String> = id.split('.').map(str::to_string).collect();
                if parts.len() >= 2 {
                    parts[1].push_str(&format!("_rank{rank}"));
                }
                new = parts.join(".");
            }
            let new = unmark(&new).to_string();
            f.rename_keys(n, &old, &new);
            f.nodes[n].id = new.clone();
            g.map.insert(&new, n);
        }
        for &c in &f.nodes[n].children {
            stack.push((c, pp_index.clone()));
        }
    }
}
