//! Node ids → node numbers, without a second copy of the ids (issue 16, item 1).
//!
//! A graph of a million nodes looked its nodes up in a `HashMap<String, usize>`: every id was
//! held twice (in its node and as the map's key), about 70 bytes a node. [`NameIndex`] holds
//! only node numbers (`u32`); a lookup hashes the id asked for and compares it with the id of
//! each candidate node, which the caller passes in (`nodes`). The hasher is seeded per index,
//! so ids crafted to collide cannot be prepared in advance.

use std::hash::BuildHasher;

use graph_ascend_dump::FastMap;
use hashbrown::HashTable;

use crate::graph::Node;

/// Ids → node numbers of one graph's `nodes`.
#[derive(Clone, Default)]
pub struct NameIndex {
    hasher: foldhash::fast::RandomState,
    /// Numbers of nodes whose own id is their name.
    table: HashTable<u32>,
    /// Names that are not the id of the node they lead to (a merged graph's former ids), and
    /// nodes past `u32::MAX`.
    aliases: FastMap<String, usize>,
}

impl std::fmt::Debug for NameIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NameIndex")
            .field("names", &self.table.len())
            .field("aliases", &self.aliases.len())
            .finish()
    }
}

impl NameIndex {
    /// An index with room for `n` names.
    pub fn with_capacity(n: usize) -> NameIndex {
        NameIndex {
            table: HashTable::with_capacity(n),
            ..NameIndex::default()
        }
    }

    /// The node named `id`.
    pub fn get(&self, nodes: &[Node], id: &str) -> Option<usize> {
        let h = self.hasher.hash_one(id);
        if let Some(&i) = self
            .table
            .find(h, |&i| nodes.get(i as usize).is_some_and(|n| *n.id == *id))
        {
            return Some(i as usize);
        }
        if self.aliases.is_empty() {
            None
        } else {
            self.aliases.get(id).copied()
        }
    }

    /// Names node `i` by its own id (`nodes[i].id`), replacing what that id named before.
    pub fn insert(&mut self, nodes: &[Node], i: usize) {
        let Some(node) = nodes.get(i) else {
            return;
        };
        self.insert_as(nodes, &node.id, i);
    }

    /// Names node `i` `name` (an alias when it is not the node's own id).
    pub fn insert_as(&mut self, nodes: &[Node], name: &str, i: usize) {
        let own = nodes.get(i).is_some_and(|n| *n.id == *name);
        let number = u32::try_from(i).ok().filter(|_| own);
        let h = self.hasher.hash_one(name);
        let hasher = &self.hasher;
        let found = self.table.find_entry(h, |&j| {
            nodes.get(j as usize).is_some_and(|n| *n.id == *name)
        });
        match (found, number) {
            (Ok(mut slot), Some(number)) => *slot.get_mut() = number,
            (Ok(slot), None) => {
                slot.remove();
                self.aliases.insert(name.to_string(), i);
            }
            (Err(_), Some(number)) => {
                self.table.insert_unique(h, number, |&j| {
                    nodes.get(j as usize).map_or(0, |n| hasher.hash_one(&*n.id))
                });
                self.aliases.remove(name);
            }
            (Err(_), None) => {
                self.aliases.insert(name.to_string(), i);
            }
        }
    }

    pub fn contains(&self, nodes: &[Node], id: &str) -> bool {
        self.get(nodes, id).is_some()
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.table.len() + self.aliases.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nodes_by_their_ids_and_aliases() {
        let nodes: Vec<Node> = ["a", "b", "c"].iter().map(|id| Node::new(id)).collect();
        let mut index = NameIndex::default();
        for i in 0..nodes.len() {
            index.insert(&nodes, i);
        }
        index.insert_as(&nodes, "old_c", 2);
        assert_eq!(index.get(&nodes, "a"), Some(0));
        assert_eq!(index.get(&nodes, "c"), Some(2));
        assert_eq!(index.get(&nodes, "old_c"), Some(2));
        assert_eq!(index.get(&nodes, "d"), None);
        assert_eq!(index.len(), 4);
        // A name given to another node moves.
        index.insert_as(&nodes, "a", 1);
        assert_eq!(index.get(&nodes, "a"), Some(1));
        index.insert_as(&nodes, "a", 0);
        assert_eq!(index.get(&nodes, "a"), Some(0));
    }
}
