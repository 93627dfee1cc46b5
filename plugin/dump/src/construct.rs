//! `construct.json`: who is whose parent, in dump order.
//!
//! Plain form `{node: parent-or-null}`; Megatron form adds `megatron_micro_step_number` and
//! makes each value `[parent, micro_step_id]`. An empty file (level L1 dumps) cannot give a
//! hierarchy and is refused, as msprobe does.

use std::path::Path;

use serde_json::Value;

use crate::error::DumpError;
use crate::json::{read_json_file, stream_object, SeenKeys};

/// The parsed hierarchy.
#[derive(Debug, Clone, Default)]
pub struct Construct {
    /// `(node, parent)` in file order.
    pub entries: Entries,
    /// Micro step of each node (Megatron form only).
    pub micro_step: crate::fast_map::FastMap<String, i64>,
    /// `megatron_micro_step_number`, when present.
    pub micro_step_num: Option<i64>,
}

const MEGATRON_KEY: &str = "megatron_micro_step_number";

impl Construct {
    /// Reads construct.json entry by entry (memory: the entries kept, not the file's parsed
    /// tree); a file the streamed reading does not take as it is (a bad file, repeated keys,
    /// Megatron values before `megatron_micro_step_number`) is read whole, which decides.
    pub fn read(path: &Path, confine: &crate::confine::Confine) -> Result<Construct, DumpError> {
        if let Some(c) = Self::read_streamed(path, confine)? {
            return Ok(c);
        }
        let value = read_json_file(path, confine)?;
        Self::from_value(path, value)
    }

    /// [`Construct::read`] member by member: `None` when the file needs the whole-file reader.
    fn read_streamed(
        path: &Path,
        confine: &crate::confine::Confine,
    ) -> Result<Option<Construct>, DumpError> {
        let mut c = Construct::default();
        // The entries' text is at most the file's: room for it at once, so the buffer never
        // holds twice its size while it grows.
        if let Ok(m) = std::fs::metadata(path) {
            c.entries
                .reserve_text(usize::try_from(m.len()).unwrap_or(0));
        }
        let mut megatron = false;
        let mut seen = SeenKeys::default();
        let complete = stream_object(path, confine, &mut |node, v| {
            if !seen.first_time(&node) {
                return false;
            }
            if node == MEGATRON_KEY {
                megatron = true;
                c.micro_step_num = v.as_i64();
                return true;
            }
            let parent = match &v {
                Value::Array(a) if megatron => {
                    if let Some(step) = a.get(1).and_then(Value::as_i64) {
                        c.micro_step.insert(node.clone(), step);
                    }
                    parent_of(path, &node, a.first().unwrap_or(&Value::Null))
                }
                other => parent_of(path, &node, other),
            };
            match parent {
                Ok(parent) => {
                    c.entries.push(&node, parent.as_deref());
                    true
                }
                Err(_) => false,
            }
        })?;
        if !complete || (c.entries.is_empty() && !megatron) {
            return Ok(None);
        }
        c.entries.resolve_parents();
        if c.first_in_cycle().is_some() {
            return Ok(None);
        }
        Ok(Some(c))
    }

    pub fn from_value(path: &Path, value: Value) -> Result<Construct, DumpError> {
        let Value::Object(map) = value else {
            return Err(DumpError::shape(
                path,
                "expected a JSON object {node: parent}",
            ));
        };
        if map.is_empty() {
            return Err(DumpError::shape(
                path,
                "the content of construct.json is empty: the dump has no module hierarchy \
                 (level L1 dumps cannot be shown as a graph; dump with level L0 or mix)",
            ));
        }
        let mut c = Construct::default();
        let megatron = map.contains_key(MEGATRON_KEY);
        if let Some(n) = map.get(MEGATRON_KEY) {
            c.micro_step_num = n.as_i64();
        }
        for (node, v) in map {
            if node == MEGATRON_KEY {
                continue;
            }
            let parent = if megatron {
                match &v {
                    Value::Array(a) => {
                        if let Some(step) = a.get(1).and_then(Value::as_i64) {
                            c.micro_step.insert(node.clone(), step);
                        }
                        parent_of(path, &node, a.first().unwrap_or(&Value::Null))?
                    }
                    other => parent_of(path, &node, other)?,
                }
            } else {
                parent_of(path, &node, &v)?
            };
            c.entries.push(&node, parent.as_deref());
        }
        c.entries.resolve_parents();
        if let Some(node) = c.first_in_cycle() {
            return Err(DumpError::shape(
                path,
                format!("\"{node}\" is its own ancestor: its parents lead back to it"),
            ));
        }
        Ok(c)
    }

    /// A node whose chain of parents comes back to it (the first met in file order), if any:
    /// such nodes would hang off no root and vanish from the graph without a word. Each node is
    /// walked once, without recursion; a listed parent is its entry's number
    /// ([`Entries::resolve_parents`]: where maps of names took about 100 bytes an entry while
    /// the file was read).
    fn first_in_cycle(&self) -> Option<&str> {
        /// Set once a node's chain is known to end at a root.
        const DONE: u8 = 2;
        const ON_PATH: u8 = 1;
        let mut state = vec![0u8; self.entries.len()];
        let mut path: Vec<usize> = Vec::new();
        for start in 0..self.entries.len() {
            let mut node = start;
            loop {
                match state[node] {
                    DONE => break,
                    ON_PATH => return Some(self.entries.get(node).0),
                    _ => {}
                }
                state[node] = ON_PATH;
                path.push(node);
                // A parent not listed has no parent: the chain ends there.
                match self.entries.parent_entry(node) {
                    Some(parent) => node = parent,
                    None => break,
                }
            }
            for node in path.drain(..) {
                state[node] = DONE;
            }
        }
        None
    }
}

/// construct.json's `(node, parent)` pairs in file order, their text in one buffer (two
/// `String`s an entry took about 100 bytes for 60 of text). Once read, a
/// parent that is itself listed is held as its entry's number, not as text again
/// ([`Entries::resolve_parents`]: the parents' text was about 40% of the file).
#[derive(Debug, Clone, Default)]
pub struct Entries {
    /// Each entry's node, then its parent's text unless the parent is an entry's number.
    text: String,
    /// Per entry: where its node starts in `text`, its length, and its parent: an entry's
    /// number (with [`PARENT_ENTRY`]), the length of its text that follows the node, or
    /// [`NO_PARENT`].
    spans: Vec<(u64, u32, u32)>,
}

/// An entry without a parent. It has [`PARENT_ENTRY`]'s bit set too, so every reader tests for it
/// first; entry numbers stop below it (`PARENT_ENTRY - 1` is never given out).
const NO_PARENT: u32 = u32::MAX;
/// Marks a parent held as an entry's number (in the low 31 bits: entries past 2^31 - 1, which
/// could not be held in memory anyway, keep their parent's text).
const PARENT_ENTRY: u32 = 1 << 31;

impl Entries {
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Adds an entry. A name or parent of 2 GiB or more cannot be held (it would not fit in
    /// memory beside the rest): it is cut to its first 2 GiB - 1 bytes.
    pub fn push(&mut self, node: &str, parent: Option<&str>) {
        let start = self.text.len() as u64;
        let node = cut(node);
        self.text.push_str(node);
        let parent_len = match parent {
            Some(p) => {
                let p = cut(p);
                self.text.push_str(p);
                p.len() as u32
            }
            None => NO_PARENT,
        };
        self.spans.push((start, node.len() as u32, parent_len));
    }

    /// Entry `i`: `(node, parent)`.
    pub fn get(&self, i: usize) -> (&str, Option<&str>) {
        let Some(&(start, len, parent)) = self.spans.get(i) else {
            return ("", None);
        };
        let start = start as usize;
        let end = start + len as usize;
        let node = self.text.get(start..end).unwrap_or("");
        let parent = match parent {
            NO_PARENT => None,
            p if p & PARENT_ENTRY != 0 => Some(self.node((p & !PARENT_ENTRY) as usize)),
            len => Some(self.text.get(end..end + len as usize).unwrap_or("")),
        };
        (node, parent)
    }

    /// Entry `i`'s node.
    fn node(&self, i: usize) -> &str {
        self.spans.get(i).map_or("", |&(start, len, _)| {
            let start = start as usize;
            self.text.get(start..start + len as usize).unwrap_or("")
        })
    }

    /// The number of entry `i`'s parent's entry, when its parent is listed (once
    /// [`Entries::resolve_parents`] ran).
    fn parent_entry(&self, i: usize) -> Option<usize> {
        match self.spans.get(i)?.2 {
            NO_PARENT => None,
            p if p & PARENT_ENTRY != 0 => Some((p & !PARENT_ENTRY) as usize),
            _ => None,
        }
    }

    /// Holds each parent that is listed as its entry's number, and its text no more: the text
    /// is rewritten without it (the entries once more, briefly, while the file's reading
    /// ends; the hierarchy is then made beside the smaller text).
    pub fn resolve_parents(&mut self) {
        let parents: Vec<u32> = {
            let index = self.index();
            (0..self.len())
                .map(|i| {
                    let listed = self.get(i).1.and_then(|p| index.find(p));
                    match listed.and_then(|j| u32::try_from(j).ok()) {
                        Some(j) if j < PARENT_ENTRY - 1 => PARENT_ENTRY | j,
                        _ => self.spans[i].2,
                    }
                })
                .collect()
        };
        let kept: usize = self
            .spans
            .iter()
            .zip(&parents)
            .map(|(&(_, len, _), &p)| len as usize + inline_len(p))
            .sum();
        let mut text = String::with_capacity(kept);
        for (span, &parent) in self.spans.iter_mut().zip(&parents) {
            let (start, len) = (span.0 as usize, span.1 as usize);
            let own = self
                .text
                .get(start..start + len + inline_len(parent))
                .unwrap_or("");
            *span = (text.len() as u64, span.1, parent);
            text.push_str(own);
        }
        self.text = text;
        self.spans.shrink_to_fit();
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, Option<&str>)> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Room for `bytes` of text (an estimate: the text may grow past it).
    pub fn reserve_text(&mut self, bytes: usize) {
        self.text.reserve(bytes);
    }

    /// The entries' numbers by node name.
    pub fn index(&self) -> EntryIndex<'_> {
        EntryIndex::of(self)
    }
}

/// The bytes of a parent's text held after its node (none when it is an entry's number).
fn inline_len(parent: u32) -> usize {
    if parent & PARENT_ENTRY != 0 {
        0
    } else {
        parent as usize
    }
}

/// `s`, or its first `2^31 - 1` bytes (at a character boundary).
fn cut(s: &str) -> &str {
    let mut end = s.len().min(PARENT_ENTRY as usize - 1);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// construct.json's entries by node name: a table of entry numbers hashing the entries' own
/// names (5 bytes a slot; a map of `&str` keys took over 30).
pub struct EntryIndex<'c> {
    entries: &'c Entries,
    hasher: foldhash::fast::RandomState,
    table: hashbrown::HashTable<u32>,
}

impl<'c> EntryIndex<'c> {
    fn of(entries: &'c Entries) -> EntryIndex<'c> {
        use std::hash::BuildHasher;
        let hasher = foldhash::fast::RandomState::default();
        let mut table = hashbrown::HashTable::with_capacity(entries.len());
        let hash = |i: u32| hasher.hash_one(entries.get(i as usize).0);
        // Numbers past u32 (4 billion entries) cannot be held in memory anyway: they are left
        // out, as not listed.
        for i in (0..entries.len()).filter_map(|i| u32::try_from(i).ok()) {
            let name = entries.get(i as usize).0;
            // A name listed twice: the last wins, as in a map.
            match table.find_entry(hash(i), |&j| entries.get(j as usize).0 == name) {
                Ok(mut slot) => *slot.get_mut() = i,
                Err(_) => {
                    table.insert_unique(hash(i), i, |&j| hash(j));
                }
            }
        }
        EntryIndex {
            entries,
            hasher,
            table,
        }
    }

    /// The number of the entry of `node`.
    pub fn find(&self, node: &str) -> Option<usize> {
        use std::hash::BuildHasher;
        let entries = self.entries;
        self.table
            .find(self.hasher.hash_one(node), |&j| {
                entries.get(j as usize).0 == node
            })
            .map(|&j| j as usize)
    }

    /// The parent of `node` (`Some(None)`: listed without one), `None` when not listed.
    pub fn parent(&self, node: &str) -> Option<Option<&'c str>> {
        self.find(node).map(|i| self.entries.get(i).1)
    }
}

fn parent_of(path: &Path, node: &str, v: &Value) -> Result<Option<String>, DumpError> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) if s.is_empty() => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => Err(DumpError::shape(
            path,
            format!("the parent of \"{node}\" must be a string or null"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory flat in dump size: listed parents become entry numbers, the rest stay text, and every
    /// entry reads back as it was given (in file order, parents before or after their children).
    #[test]
    fn listed_parents_are_held_by_number() {
        let given: [(&str, Option<&str>); 5] = [
            ("Functional.relu.0.forward", Some("Module.block.forward.0")),
            ("Module.block.forward.0", None),
            (
                "Functional.gelu.0.forward",
                Some("Module.not_listed.forward.0"),
            ),
            ("Module.block.backward.0", Some("Module.block.forward.0")),
            ("Tensor.add.0.forward", Some("Module.block.backward.0")),
        ];
        let mut entries = Entries::default();
        for (node, parent) in given {
            entries.push(node, parent);
        }
        let before = entries.text.len();
        entries.resolve_parents();
        assert_eq!(entries.iter().collect::<Vec<_>>(), given);
        assert_eq!(
            before - entries.text.len(),
            3 * "Module.block.forward.0".len() - "Module.block.forward.0".len()
                + "Module.block.backward.0".len()
        );
        assert_eq!(
            (0..5).map(|i| entries.parent_entry(i)).collect::<Vec<_>>(),
            [Some(1), None, None, Some(1), Some(3)]
        );
        assert_eq!(
            entries.index().parent("Tensor.add.0.forward"),
            Some(Some("Module.block.backward.0"))
        );
    }
}
