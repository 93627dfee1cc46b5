//! `stack.json`: the Python call stack of each node.
//!
//! Old form `{node: [frames]}`; new form (key `"0"` present) `{"<i>": [[nodes], [frames]]}`,
//! where one frame list is shared by several nodes. Shared lists are kept once (`Arc`).

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::json::read_json_file;
use crate::DumpError;

/// `node → frames`.
#[derive(Debug, Clone, Default)]
pub struct StackMap {
    pub stacks: crate::FastMap<String, Arc<Vec<String>>>,
}

impl StackMap {
    pub fn read(path: &Path, confine: &crate::Confine) -> Result<StackMap, DumpError> {
        let value = read_json_file(path, confine)?;
        Self::from_value(path, value)
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
