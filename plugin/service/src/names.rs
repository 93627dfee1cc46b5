//! Name search: case-insensitive substring search over every node name of one graph.
//!
//! The names of a graph are read once (one indexed query in node order) and kept, lower-cased,
//! per (file, graph, micro step); a search is then a scan of contiguous memory, a few
//! milliseconds for a million names. The cache holds a few graphs and forgets the oldest.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use graph_ascend_visdb::store::GraphKey;
use graph_ascend_visdb::StoreError;

use crate::catalog::GraphFile;

/// How many graphs' names are kept.
const CACHED_GRAPHS: usize = 8;

/// The names of one graph, ready to search.
pub struct NameIndex {
    names: Vec<String>,
    lower: Vec<String>,
}

impl NameIndex {
    pub fn new(names: Vec<String>) -> NameIndex {
        let lower = names.iter().map(|n| n.to_lowercase()).collect();
        NameIndex { names, lower }
    }

    /// The first `limit` names containing `query` (ignoring case) in node order, and how many
    /// match in all. An empty query matches every name.
    pub fn search(&self, query: &str, limit: usize) -> (Vec<String>, usize) {
        let query = query.to_lowercase();
        let mut out = Vec::new();
        let mut total = 0;
        for (i, lower) in self.lower.iter().enumerate() {
            if lower.contains(&query) {
                total += 1;
                if out.len() < limit {
                    out.push(self.names[i].clone());
                }
            }
        }
        (out, total)
    }
}

type CacheKey = (PathBuf, GraphKey, i64);

/// Recently searched graphs.
#[derive(Default)]
pub struct NameCache {
    entries: Mutex<VecDeque<(CacheKey, usize, Arc<NameIndex>)>>,
}

impl NameCache {
    /// The index of a graph, read from the file on first use. A file replaced on disk gets a new
    /// [`GraphFile`] and so a new entry.
    pub fn get(
        &self,
        file: &Arc<GraphFile>,
        graph: GraphKey,
        micro_step: i64,
    ) -> Result<Arc<NameIndex>, StoreError> {
        let key = (file.path.clone(), graph, micro_step);
        let identity = Arc::as_ptr(file) as usize;
        if let Ok(entries) = self.entries.lock() {
            if let Some((_, _, index)) = entries
                .iter()
                .find(|(k, id, _)| *k == key && *id == identity)
            {
                return Ok(index.clone());
            }
        }
        let names = file.with_store(|s| s.node_names(graph, micro_step))?;
        let index = Arc::new(NameIndex::new(names));
        if let Ok(mut entries) = self.entries.lock() {
            entries.retain(|(k, _, _)| *k != key);
            entries.push_front((key, identity, index.clone()));
            entries.truncate(CACHED_GRAPHS);
        }
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::NameIndex;

    #[test]
    fn substring_ignoring_case_in_order() {
        let idx = NameIndex::new(vec![
            "Module.Attn.forward".into(),
            "Functional.linear.0".into(),
            "Module.attn.backward".into(),
        ]);
        let (names, total) = idx.search("ATTN", 1);
        assert_eq!(names, ["Module.Attn.forward"]);
        assert_eq!(total, 2);
    }
}
