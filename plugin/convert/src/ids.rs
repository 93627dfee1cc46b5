//! The ids of one graph's nodes, in one text buffer.
//!
//! Each node held its id as a `Box<str>`: 16 bytes in the node and an allocation of the text
//! rounded up to the allocator's size class (48 bytes for a 33-byte id, with its header). Here
//! the ids of a graph are one `String`, node after node, and a table of where each starts
//! (4 bytes a node while the text is under 4 GiB): about 37 bytes for the same id. A node's id
//! is asked of its graph ([`crate::graph::Graph::id`]); ids never change once given.

/// Node `n`'s id is `text[start(n)..start(n + 1)]` (the last one ends with the text).
#[derive(Debug, Clone, Default)]
pub struct NodeIds {
    text: String,
    starts: Starts,
}

/// Where each id starts in the text: `u32` while the text fits, `u64` past 4 GiB.
#[derive(Debug, Clone)]
enum Starts {
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
}

impl Default for Starts {
    fn default() -> Starts {
        Starts::Narrow(Vec::new())
    }
}

impl NodeIds {
    /// Room for `ids` more ids of `bytes` bytes in all.
    pub fn reserve(&mut self, ids: usize, bytes: usize) {
        self.text.reserve(bytes);
        match &mut self.starts {
            Starts::Narrow(s) => s.reserve(ids),
            Starts::Wide(s) => s.reserve(ids),
        }
    }

    /// Gives back the room not used.
    pub fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        match &mut self.starts {
            Starts::Narrow(s) => s.shrink_to_fit(),
            Starts::Wide(s) => s.shrink_to_fit(),
        }
    }

    /// Appends the id of the next node.
    pub fn push(&mut self, id: &str) {
        let start = self.text.len();
        if let Starts::Narrow(s) = &self.starts {
            if u32::try_from(start).is_err() {
                self.starts = Starts::Wide(s.iter().map(|&x| u64::from(x)).collect());
            }
        }
        match &mut self.starts {
            Starts::Narrow(s) => s.push(start as u32),
            Starts::Wide(s) => s.push(start as u64),
        }
        self.text.push_str(id);
    }

    /// How many ids.
    pub fn count(&self) -> usize {
        match &self.starts {
            Starts::Narrow(s) => s.len(),
            Starts::Wide(s) => s.len(),
        }
    }

    fn start(&self, n: usize) -> Option<usize> {
        match &self.starts {
            Starts::Narrow(s) => s.get(n).map(|&x| x as usize),
            Starts::Wide(s) => s.get(n).and_then(|&x| usize::try_from(x).ok()),
        }
    }

    /// Node `n`'s id (empty for a number past the last node).
    pub fn get(&self, n: usize) -> &str {
        let Some(start) = self.start(n) else {
            return "";
        };
        let end = self.start(n + 1).unwrap_or(self.text.len());
        self.text.get(start..end).unwrap_or("")
    }

    /// Bytes held (text and table), for the memory accounting of tests.
    #[cfg(test)]
    pub fn heap_bytes(&self) -> usize {
        self.text.capacity()
            + match &self.starts {
                Starts::Narrow(s) => s.capacity() * 4,
                Starts::Wide(s) => s.capacity() * 8,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_back_as_given() {
        let mut ids = NodeIds::default();
        for id in ["DefaultModel", "", "Module.a.forward.0", "é.ü"] {
            ids.push(id);
        }
        assert_eq!(ids.count(), 4);
        assert_eq!(
            (0..5).map(|n| ids.get(n)).collect::<Vec<_>>(),
            ["DefaultModel", "", "Module.a.forward.0", "é.ü", ""]
        );
        assert!(ids.heap_bytes() >= 4 * 4 + 34);
    }

    #[test]
    fn starts_widen_past_four_gib() {
        // The switch itself, without 4 GiB of text: a wide table answers the same.
        let mut ids = NodeIds::default();
        ids.push("a");
        ids.push("bc");
        if let Starts::Narrow(s) = &ids.starts {
            ids.starts = Starts::Wide(s.iter().map(|&x| u64::from(x)).collect());
        }
        ids.push("def");
        assert_eq!((ids.get(0), ids.get(1), ids.get(2)), ("a", "bc", "def"));
        assert_eq!(ids.count(), 3);
    }
}
