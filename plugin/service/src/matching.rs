//! Manual matching: add and delete pairs (with their forward/backward twin and, on request,
//! their descendants), match from a `.vis.config` file, and save one.
//!
//! Semantics follow msprobe's plugin (`docs/msprobe-api.md` §4): a new pair's
//! precision is recomputed by the converter's comparison ([`crate::precision`]); the target gets
//! `matched_node_link = [golden parent, golden]`, the golden side the mirror image; both rows are
//! marked `modified = 1`. Unlike msprobe, one request's edits are one SQLite transaction (two
//! tabs editing at once are serialized, and a failure leaves the file as it was), the check that
//! a pair is matched before deleting it reads the file rather than a cache that only an earlier
//! `loadGraphMatchedRelations` filled, and a node re-matched to a new partner releases its old
//! partner instead of leaving it pointing at a node that no longer points back.

use std::collections::{HashMap, HashSet};

use graph_ascend_convert::compare::metrics::TensorDirs;
use graph_ascend_convert::compare::CompareMode;
use graph_ascend_visdb::store::{GraphKey, MatchUpdate, NodeDetailRow, Side};
use graph_ascend_visdb::{Store, StoreError};
use serde_json::Value;

use crate::precision::{self, NodeData};

/// One edited node, for patching the clients' laid-out views after the commit.
#[derive(Debug, Clone)]
pub struct Patch {
    pub side: Side,
    pub name: String,
    pub link: Vec<String>,
    pub precision_index: Option<f64>,
}

/// What one request did: msprobe's `matchedTotal` / `matchedSuccess`, and the edits.
#[derive(Debug, Default)]
pub struct Outcome {
    pub total: i32,
    pub success: i32,
    pub patches: Vec<Patch>,
}

/// The edits of one request, run inside one write transaction of `store`.
pub struct Editor<'a> {
    store: &'a Store,
    npu: GraphKey,
    bench: GraphKey,
    mode: CompareMode,
    /// The nodes of each side (target, golden) this request works on: msprobe's link of a new
    /// pair is the partner's ancestor chain through these nodes, ending with the first
    /// ancestor outside them.
    scope: [HashSet<String>; 2],
    pub outcome: Outcome,
}

/// `forward` ↔ `backward` in a node name (msprobe's "opposite" node).
pub fn opposite(name: &str) -> String {
    if name.contains("forward") {
        name.replace("forward", "backward")
    } else if name.contains("backward") {
        name.replace("backward", "forward")
    } else {
        name.to_owned()
    }
}

/// The key under which msprobe pairs unmatched children of a matched pair: the node's short
/// name (the module or API name part) and its type.
pub fn child_key(name: &str, node_type: i32) -> String {
    let parts: Vec<&str> = name.split('.').collect();
    let n = parts.len();
    let digit = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let at = |back: usize| {
        if n >= back {
            Some(parts[n - back])
        } else {
            None
        }
    };
    let base = if node_type == 0 {
        match at(4) {
            Some(p) if !digit(p) => p,
            _ if n > 5 => parts[n - 5],
            _ => "",
        }
    } else {
        match at(2) {
            Some(p) if !digit(p) => p,
            _ if n > 2 => parts[n - 3],
            _ => "",
        }
    };
    format!("{base}.{node_type}")
}

fn json_text(v: &Value) -> String {
    graph_ascend_convert::pyjson::value(v)
}

impl<'a> Editor<'a> {
    pub fn new(store: &'a Store, npu: GraphKey, mode: CompareMode) -> Editor<'a> {
        Editor {
            store,
            npu,
            bench: GraphKey {
                side: Side::Bench,
                ..npu
            },
            mode,
            scope: [HashSet::new(), HashSet::new()],
            outcome: Outcome::default(),
        }
    }

    fn side_index(side: Side) -> usize {
        match side {
            Side::Npu => 0,
            Side::Bench => 1,
        }
    }

    /// Sets the nodes of one side this request works on (see `scope`).
    pub fn set_scope(&mut self, side: Side, names: impl IntoIterator<Item = String>) {
        self.scope[Self::side_index(side)] = names.into_iter().collect();
    }

    /// `names` and all their descendants on one side (for a match with descendants).
    pub fn subtree(&self, side: Side, names: &[String]) -> Result<Vec<String>, StoreError> {
        let mut out: Vec<String> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut queue: Vec<String> = names.to_vec();
        while let Some(name) = queue.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            for child in self.store.children(self.graph(side), &name)? {
                queue.push(child.name);
            }
            out.push(name);
        }
        Ok(out)
    }

    /// The `matched_node_link` that points at `row` (a node of `side`): its ancestors through
    /// the request's scope, then the first ancestor outside it, then the node.
    fn link_to(&self, side: Side, row: &NodeDetailRow) -> Result<Vec<String>, StoreError> {
        let scope = &self.scope[Self::side_index(side)];
        let mut chain = vec![row.node.name.clone()];
        let mut up = row.node.up_node.clone();
        while !up.is_empty() && chain.len() < 10_000 && !chain.contains(&up) {
            chain.push(up.clone());
            if !scope.contains(&up) {
                break;
            }
            match self.store.node(self.graph(side), &up)? {
                Some(parent) => up = parent.up_node,
                None => break,
            }
        }
        chain.reverse();
        Ok(chain)
    }

    fn graph(&self, side: Side) -> GraphKey {
        match side {
            Side::Npu => self.npu,
            Side::Bench => self.bench,
        }
    }

    fn write(
        &mut self,
        side: Side,
        row: &NodeDetailRow,
        link: Vec<String>,
        input: &Value,
        output: &Value,
        precision_index: Option<f64>,
    ) -> Result<(), StoreError> {
        self.store.update_match(&MatchUpdate {
            graph: self.graph(side),
            name: row.node.name.clone(),
            matched_node_link: graph_ascend_convert::pyjson::str_list(&link),
            input_data: json_text(input),
            output_data: json_text(output),
            precision_index,
        })?;
        self.outcome.patches.push(Patch {
            side,
            name: row.node.name.clone(),
            link,
            precision_index,
        });
        Ok(())
    }

    /// Clears the link of `name` on `side` if it points at `partner` (a stale half of a pair).
    fn release(&mut self, side: Side, name: &str, partner: &str) -> Result<(), StoreError> {
        let Some(row) = self.store.node_detail(self.graph(side), name)? else {
            return Ok(());
        };
        if row.node.matched_node_link.last().map(String::as_str) != Some(partner) {
            return Ok(());
        }
        let strip = side == Side::Npu && self.mode != CompareMode::Md5;
        let input = if strip {
            precision::strip_compare_columns(&row.input_data)
        } else {
            row.input_data.clone()
        };
        let output = if strip {
            precision::strip_compare_columns(&row.output_data)
        } else {
            row.output_data.clone()
        };
        self.write(side, &row, Vec::new(), &input, &output, None)
    }

    /// Matches one pair (no twin). `check_type`: both nodes must be of one type.
    fn add_one(&mut self, npu: &str, bench: &str, check_type: bool) -> Result<bool, StoreError> {
        let n = self.store.node_detail(self.npu, npu)?;
        let b = self.store.node_detail(self.bench, bench)?;
        let (Some(n), Some(b)) = (n, b) else {
            return Ok(false);
        };
        if check_type && n.node.node_type != b.node.node_type {
            return Ok(false);
        }
        let tensors = if self.mode == CompareMode::Tensor {
            Some(TensorDirs {
                npu: self.store.dump_data_dir(self.npu, npu)?.unwrap_or_default(),
                bench: self
                    .store
                    .dump_data_dir(self.bench, bench)?
                    .unwrap_or_default(),
                // Tensor folders recorded in a converted file are where the dumps were when
                // they were converted, often outside the logdir.
                confine: Default::default(),
            })
        } else {
            None
        };
        let result = match precision::compare_pair(
            self.mode,
            &NodeData {
                name: npu,
                input: &n.input_data,
                output: &n.output_data,
            },
            &NodeData {
                name: bench,
                input: &b.input_data,
                output: &b.output_data,
            },
            tensors.as_ref(),
        ) {
            Ok(r) => r,
            Err(e) => {
                tracing::info!("cannot compare {npu} with {bench}: {e}");
                return Ok(false);
            }
        };
        // Old partners that would be left pointing at these nodes are released first.
        if let Some(old) = n.node.matched_node_link.last().filter(|o| *o != bench) {
            self.release(Side::Bench, &old.clone(), npu)?;
        }
        if let Some(old) = b.node.matched_node_link.last().filter(|o| *o != npu) {
            self.release(Side::Npu, &old.clone(), bench)?;
        }
        let npu_link = self.link_to(Side::Bench, &b)?;
        let bench_link = self.link_to(Side::Npu, &n)?;
        self.write(
            Side::Npu,
            &n,
            npu_link,
            &result.input,
            &result.output,
            Some(result.precision_index),
        )?;
        self.write(
            Side::Bench,
            &b,
            bench_link,
            &b.input_data,
            &b.output_data,
            None,
        )?;
        Ok(true)
    }

    /// Matches a pair and its forward/backward twin, counting both as msprobe does.
    pub fn add_pair(&mut self, npu: &str, bench: &str) -> Result<bool, StoreError> {
        self.outcome.total += 1;
        let ok = self.add_one(npu, bench, true)?;
        if ok {
            self.outcome.success += 1;
        }
        let (on, ob) = (opposite(npu), opposite(bench));
        if on != npu || ob != bench {
            self.outcome.total += 1;
            if self.add_one(&on, &ob, true)? {
                self.outcome.success += 1;
            }
        }
        Ok(ok)
    }

    /// Matches a pair, then pairs its unmatched children by [`child_key`] in order, recursively.
    /// Iterative (hierarchies may be thousands of levels deep), in the order of msprobe's
    /// recursion: a pair, then its first child pair and all below it, then the next.
    pub fn add_with_children(&mut self, npu: &str, bench: &str) -> Result<bool, StoreError> {
        if !self.add_pair(npu, bench)? {
            return Ok(false);
        }
        let mut seen = HashSet::from([npu.to_owned()]);
        let mut pending = self.unmatched_child_pairs(npu, bench)?;
        pending.reverse();
        while let Some((n, b)) = pending.pop() {
            if !seen.insert(n.clone()) {
                return Err(self.cycle(&n));
            }
            if self.add_pair(&n, &b)? {
                let mut children = self.unmatched_child_pairs(&n, &b)?;
                children.reverse();
                pending.extend(children);
            }
        }
        Ok(true)
    }

    /// The error for a target node met again below itself (a corrupt file).
    fn cycle(&self, node: &str) -> StoreError {
        StoreError::Data {
            path: self.store.path().to_owned(),
            what: "hierarchy".into(),
            reason: format!("{node} is its own ancestor (its up_node chain leads back to it)"),
        }
    }

    /// The unmatched children of a matched pair, paired by [`child_key`] in node order.
    fn unmatched_child_pairs(
        &self,
        npu: &str,
        bench: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let unmatched = |editor: &Self, graph: GraphKey, parent: &str| -> Result<_, StoreError> {
            let mut keyed: Vec<(String, Vec<String>)> = Vec::new();
            for child in editor.store.children(graph, parent)? {
                if !child.matched_node_link.is_empty() {
                    continue;
                }
                let key = child_key(&child.name, child.node_type);
                match keyed.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, names)) => names.push(child.name),
                    None => keyed.push((key, vec![child.name])),
                }
            }
            Ok(keyed)
        };
        let npu_children = unmatched(self, self.npu, npu)?;
        let mut bench_children: HashMap<String, Vec<String>> =
            unmatched(self, self.bench, bench)?.into_iter().collect();
        let mut pairs = Vec::new();
        for (key, names) in npu_children {
            let Some(others) = bench_children.remove(&key) else {
                continue;
            };
            pairs.extend(names.into_iter().zip(others));
        }
        Ok(pairs)
    }

    /// Matches one pair from a configuration file (no type check, no twin, no recursion).
    pub fn add_from_config(&mut self, npu: &str, bench: &str) -> Result<(), StoreError> {
        self.outcome.total += 1;
        if self.add_one(npu, bench, false)? {
            self.outcome.success += 1;
        }
        Ok(())
    }

    /// Unmatches one pair (no twin) if the two nodes are matched to each other.
    fn delete_one(&mut self, npu: &str, bench: &str) -> Result<bool, StoreError> {
        let n = self.store.node_detail(self.npu, npu)?;
        let b = self.store.node_detail(self.bench, bench)?;
        let (Some(n), Some(b)) = (n, b) else {
            return Ok(false);
        };
        let linked = n.node.matched_node_link.last().map(String::as_str) == Some(bench)
            && b.node.matched_node_link.last().map(String::as_str) == Some(npu);
        if !linked {
            return Ok(false);
        }
        let strip = self.mode != CompareMode::Md5;
        let (input, output) = if strip {
            (
                precision::strip_compare_columns(&n.input_data),
                precision::strip_compare_columns(&n.output_data),
            )
        } else {
            (n.input_data.clone(), n.output_data.clone())
        };
        self.write(Side::Npu, &n, Vec::new(), &input, &output, None)?;
        self.write(
            Side::Bench,
            &b,
            Vec::new(),
            &b.input_data,
            &b.output_data,
            None,
        )?;
        Ok(true)
    }

    /// Unmatches a pair and its forward/backward twin.
    pub fn delete_pair(&mut self, npu: &str, bench: &str) -> Result<bool, StoreError> {
        self.outcome.total += 1;
        let ok = self.delete_one(npu, bench)?;
        if ok {
            self.outcome.success += 1;
        }
        let (on, ob) = (opposite(npu), opposite(bench));
        if on != npu || ob != bench {
            self.outcome.total += 1;
            if self.delete_one(&on, &ob)? {
                self.outcome.success += 1;
            }
        }
        Ok(ok)
    }

    /// Unmatches a pair, then every matched target descendant against its partner.
    pub fn delete_with_children(&mut self, npu: &str, bench: &str) -> Result<bool, StoreError> {
        if !self.delete_pair(npu, bench)? {
            return Ok(false);
        }
        self.delete_descendants(npu)?;
        Ok(true)
    }

    /// Unmatches every matched descendant of `npu`, depth first in node order (msprobe's
    /// recursion, walked with an explicit stack of children lists).
    fn delete_descendants(&mut self, npu: &str) -> Result<(), StoreError> {
        let mut seen = HashSet::from([npu.to_owned()]);
        let mut levels = vec![self.store.children(self.npu, npu)?.into_iter()];
        while let Some(level) = levels.last_mut() {
            let Some(child) = level.next() else {
                levels.pop();
                continue;
            };
            if !seen.insert(child.name.clone()) {
                return Err(self.cycle(&child.name));
            }
            if let Some(partner) = child.matched_node_link.last() {
                self.delete_pair(&child.name, partner)?;
            }
            levels.push(self.store.children(self.npu, &child.name)?.into_iter());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twins_swap_direction() {
        assert_eq!(
            opposite("Functional.linear.10.forward"),
            "Functional.linear.10.backward"
        );
        assert_eq!(
            opposite("Module.fc.Linear.backward.0"),
            "Module.fc.Linear.forward.0"
        );
        assert_eq!(opposite("Apis_Between_Modules.0"), "Apis_Between_Modules.0");
    }

    #[test]
    fn children_are_keyed_by_short_name_and_type() {
        assert_eq!(
            child_key("Module.layers.2.mlp.fc1.Linear.forward.0", 0),
            "fc1.0"
        );
        assert_eq!(child_key("Functional.linear.10.forward", 1), "linear.1");
        assert_eq!(child_key("Module.layers.0.Block.forward.0", 0), "layers.0");
        assert_eq!(child_key("x", 1), ".1");
    }
}
