//! `stack.json`: the Python call stack of each node.
//!
//! Old form `{node: [frames]}`; new form (key `"0"` present) `{"<i>": [[nodes], [frames]]}`,
//! where one frame list is shared by several nodes. Shared lists are kept once (`Arc`).

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::error::DumpError;
use crate::json::{read_json_file, stream_object, SeenKeys};

/// `node → frames`.
#[derive(Debug, Clone, Default)]
pub struct StackMap {
    pub stacks: crate::fast_map::FastMap<String, Arc<Vec<String>>>,
}

/// Where stack.json's `node → frames` pairs go as they are read ([`StackMap::read_into`]).
pub trait StackSink {
    /// Node `node`'s frames (equal lists share one `Arc`). A node may be given more than once:
    /// the last time wins, as in a map.
    fn stack(&mut self, node: &str, frames: &Arc<Vec<String>>);
    /// Forget every pair given so far: the file is read again, whole.
    fn restart(&mut self);
}

impl StackSink for StackMap {
    fn stack(&mut self, node: &str, frames: &Arc<Vec<String>>) {
        self.stacks.insert(node.to_string(), Arc::clone(frames));
    }

    fn restart(&mut self) {
        self.stacks.clear();
    }
}

impl StackMap {
    /// Reads stack.json entry by entry (memory: the stacks kept, equal ones once, not the
    /// file's parsed tree); a file the streamed reading does not take as it is (a bad file,
    /// repeated keys, a new-form file whose key `"0"` is not first) is read whole, which decides.
    pub fn read(path: &Path, confine: &crate::confine::Confine) -> Result<StackMap, DumpError> {
        let mut out = StackMap::default();
        Self::read_into(path, confine, &mut out)?;
        Ok(out)
    }

    /// [`StackMap::read`] handing each pair to `sink` instead of keeping a map (a graph's
    /// skeleton takes each node's frames as they are read). When the file is
    /// read again whole, `sink` is told to restart first; on an error, what it was given is
    /// not the file's.
    pub fn read_into(
        path: &Path,
        confine: &crate::confine::Confine,
        sink: &mut dyn StackSink,
    ) -> Result<(), DumpError> {
        if Self::read_streamed(path, confine, sink)? {
            return Ok(());
        }
        sink.restart();
        let value = read_json_file(path, confine)?;
        let whole = Self::from_value(path, value)?;
        for (node, frames) in &whole.stacks {
            sink.stack(node, frames);
        }
        Ok(())
    }

    /// [`StackMap::read_into`] member by member: `false` when the file needs the whole-file
    /// reader.
    fn read_streamed(
        path: &Path,
        confine: &crate::confine::Confine,
        out: &mut dyn StackSink,
    ) -> Result<bool, DumpError> {
        let mut shared = Interner::default();
        let mut seen = SeenKeys::default();
        // The new form is known by its key "0"; msprobe writes it first.
        let mut new_form: Option<bool> = None;
        let complete = stream_object(path, confine, &mut |key, v| {
            if !seen.first_time(&key) {
                return false;
            }
            let is_new = *new_form.get_or_insert(key == "0");
            if !is_new {
                if key == "0" {
                    return false;
                }
                return match frames_of(path, &key, &v) {
                    Ok(frames) => {
                        out.stack(&key, &shared.get(frames));
                        true
                    }
                    Err(_) => false,
                };
            }
            let Value::Array(pair) = v else {
                return false;
            };
            let (Some(Value::Array(names)), Some(frames)) = (pair.first(), pair.get(1)) else {
                return false;
            };
            let Ok(frames) = frames_of(path, &key, frames) else {
                return false;
            };
            let frames = shared.get(frames);
            for n in names {
                let Value::String(n) = n else {
                    return false;
                };
                out.stack(n, &frames);
            }
            true
        })?;
        Ok(complete)
    }

    pub fn from_value(path: &Path, value: Value) -> Result<StackMap, DumpError> {
        let Value::Object(map) = value else {
            return Err(DumpError::shape(path, "expected a JSON object"));
        };
        let mut out = StackMap::default();
        if map.contains_key("0") {
            for (key, v) in map {
                let bad = || {
                    DumpError::shape(
                        path,
                        format!("entry \"{key}\" must be [[node names], [stack frames]]"),
                    )
                };
                let Value::Array(pair) = v else {
                    return Err(bad());
                };
                let (Some(Value::Array(names)), Some(frames)) = (pair.first(), pair.get(1)) else {
                    return Err(bad());
                };
                let frames = Arc::new(frames_of(path, &key, frames)?);
                for n in names {
                    let Value::String(n) = n else {
                        return Err(bad());
                    };
                    out.stacks.insert(n.clone(), Arc::clone(&frames));
                }
            }
        } else {
            for (key, v) in map {
                let frames = frames_of(path, &key, &v)?;
                out.stacks.insert(key, Arc::new(frames));
            }
        }
        Ok(out)
    }

    pub fn get(&self, node: &str) -> Option<&Arc<Vec<String>>> {
        self.stacks.get(node)
    }
}

/// Equal frame lists kept once: the nodes of every layer of a model are called from the same
/// lines. Which list a node shares is not seen in the output (stacks are de-duplicated by text
/// when written).
#[derive(Default)]
struct Interner(std::collections::HashSet<Arc<Vec<String>>, foldhash::fast::RandomState>);

impl Interner {
    fn get(&mut self, frames: Vec<String>) -> Arc<Vec<String>> {
        if let Some(a) = self.0.get(&frames) {
            return Arc::clone(a);
        }
        let a = Arc::new(frames);
        self.0.insert(Arc::clone(&a));
        a
    }
}

fn frames_of(path: &Path, key: &str, v: &Value) -> Result<Vec<String>, DumpError> {
    match v {
        Value::Array(a) => a
            .iter()
            .map(|f| match f {
                Value::String(s) => Ok(s.clone()),
                _ => Err(DumpError::shape(
                    path,
                    format!("stack of \"{key}\" must be a list of strings"),
                )),
            })
            .collect(),
        Value::Null => Ok(Vec::new()),
        _ => Err(DumpError::shape(
            path,
            format!("stack of \"{key}\" must be a list of strings"),
        )),
    }
}
