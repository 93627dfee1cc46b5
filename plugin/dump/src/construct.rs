//! `construct.json`: who is whose parent, in dump order.
//!
//! Plain form `{node: parent-or-null}`; Megatron form adds `megatron_micro_step_number` and
//! makes each value `[parent, micro_step_id]`. An empty file (level L1 dumps) cannot give a
//! hierarchy and is refused, as msprobe does.

use std::path::Path;

use serde_json::Value;

use crate::json::{read_json_file, stream_object, SeenKeys};
use crate::DumpError;

/// The parsed hierarchy.
#[derive(Debug, Clone, Default)]
pub struct Construct {
    /// `(node, parent)` in file order.
    pub entries: Vec<(String, Option<String>)>,
    /// Micro step of each node (Megatron form only).
    pub micro_step: crate::FastMap<String, i64>,
    /// `megatron_micro_step_number`, when present.
    pub micro_step_num: Option<i64>,
}

const MEGATRON_KEY: &str = "megatron_micro_step_number";

impl Construct {
    /// Reads construct.json entry by entry (memory: the entries kept, not the file's parsed
    /// tree); a file the streamed reading does not take as it is (a bad file, repeated keys,
    /// Megatron values before `megatron_micro_step_number`) is read whole, which decides.
    pub fn read(path: &Path, confine: &crate::Confine) -> Result<Construct, DumpError> {
        if let Some(c) = Self::read_streamed(path, confine)? {
            return Ok(c);
        }
        let value = read_json_file(path, confine)?;
        Self::from_value(path, value)
    }

    /// [`Construct::read`] member by member: `None` when the file needs the whole-file reader.
    fn read_streamed(
        path: &Path,
        confine: &crate::Confine,
    ) -> Result<Option<Construct>, DumpError> {
        let mut c = Construct::default();
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
                    c.entries.push((node, parent));
                    true
                }
                Err(_) => false,
            }
        })?;
        if !complete || (c.entries.is_empty() && !megatron) || c.first_in_cycle().is_some() {
            return Ok(None);
        }
        c.entries.shrink_to_fit();
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
            c.entries.push((node, parent));
        }
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
    /// walked once, without recursion.
    fn first_in_cycle(&self) -> Option<&str> {
        let parents: crate::FastMap<&str, &str> = self
            .entries
            .iter()
            .filter_map(|(node, parent)| Some((node.as_str(), parent.as_deref()?)))
            .collect();
        /// Set once a node's chain is known to end at a root.
        const DONE: u8 = 2;
        const ON_PATH: u8 = 1;
        let mut state: crate::FastMap<&str, u8> = crate::FastMap::default();
        let mut path: Vec<&str> = Vec::new();
        for (start, _) in &self.entries {
            let mut node = start.as_str();
            loop {
                match state.get(node) {
                    Some(&DONE) => break,
                    Some(_) => return Some(node),
                    None => {}
                }
                state.insert(node, ON_PATH);
                path.push(node);
                match parents.get(node) {
                    Some(parent) => node = parent,
                    None => break,
                }
            }
            for node in path.drain(..) {
                state.insert(node, DONE);
            }
        }
        None
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
