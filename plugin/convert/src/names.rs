//! Node ids → node numbers, without a second copy of the ids.
//!
//! A graph of a million nodes looked its nodes up in a `HashMap<String, usize>`: every id was
//! held twice (in its node and as the map's key), about 70 bytes a node. [`NameIndex`] holds
//! only node numbers (`u32`); a lookup hashes the id asked for and compares it with the id of
//! each candidate node, which the caller passes in (`ids`). The hasher is seeded per index,
//! so ids crafted to collide cannot be prepared in advance.

use std::hash::BuildHasher;

use graph_ascend_dump::FastMap;
use hashbrown::HashTable;

use crate::ids::NodeIds;

/// Ids → node numbers of one graph's nodes.
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
    pub fn get(&self, ids: &NodeIds, id: &str) -> Option<usize> {
        let h = self.hasher.hash_one(id);
        if let Some(&i) = self.table.find(h, |&i| named(ids, i, id)) {
            return Some(i as usize);
        }
        if self.aliases.is_empty() {
            None
        } else {
            self.aliases.get(id).copied()
        }
    }

    /// Names node `i` by its own id (`ids.get(i)`), replacing what that id named before.
    pub fn insert(&mut self, ids: &NodeIds, i: usize) {
        if i < ids.count() {
            self.insert_as(ids, ids.get(i), i);
        }
    }

    /// Names node `i` `name` (an alias when it is not the node's own id).
    pub fn insert_as(&mut self, ids: &NodeIds, name: &str, i: usize) {
        let number = u32::try_from(i).ok().filter(|&i| named(ids, i, name));
        let h = self.hasher.hash_one(name);
        let hasher = &self.hasher;
        let found = self.table.find_entry(h, |&j| named(ids, j, name));
        match (found, number) {
            (Ok(mut slot), Some(number)) => *slot.get_mut() = number,
            (Ok(slot), None) => {
                slot.remove();
                self.aliases.insert(name.to_string(), i);
            }
            (Err(_), Some(number)) => {
                self.table
                    .insert_unique(h, number, |&j| hasher.hash_one(ids.get(j as usize)));
                self.aliases.remove(name);
            }
            (Err(_), None) => {
                self.aliases.insert(name.to_string(), i);
            }
        }
    }

    pub fn contains(&self, ids: &NodeIds, id: &str) -> bool {
        self.get(ids, id).is_some()
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.table.len() + self.aliases.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Node `i` exists and its id is `id`.
fn named(ids: &NodeIds, i: u32, id: &str) -> bool {
    (i as usize) < ids.count() && ids.get(i as usize) == id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nodes_by_their_ids_and_aliases() {
        let mut nodes = NodeIds::default();
        for id in ["a", "b", "c"] {
            nodes.push(id);
        }
        let mut index = NameIndex::default();
        for i in 0..nodes.count() {
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
