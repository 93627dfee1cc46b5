//! `dump.json`: the per-op statistics of one rank.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::json::read_json_file;
use crate::DumpError;

/// A parsed `dump.json`. Entries stay as JSON until a node needs them.
#[derive(Debug, Clone)]
pub struct DumpFile {
    pub path: PathBuf,
    /// `statistics`, `tensor`, `structure`, …
    pub task: String,
    pub level: String,
    /// `pytorch` (default), `mindspore`, `mindtorch`.
    pub framework: String,
    /// Absolute tensor folder for `task: tensor`, else `None`.
    pub dump_data_dir: Option<String>,
    /// `op name → entry`, in file order.
    pub data: Map<String, Value>,
}

impl DumpFile {
    /// Reads and checks `dump.json`.
    pub fn read(path: &Path) -> Result<DumpFile, DumpError> {
        let value = read_json_file(path)?;
        Self::from_value(path, value)
    }

    /// Checks the shape of an already parsed `dump.json`.
    pub fn from_value(path: &Path, value: Value) -> Result<DumpFile, DumpError> {
        let Value::Object(mut top) = value else {
            return Err(DumpError::shape(
                path,
                "expected a JSON object at the top level",
            ));
        };
        let data = match top.remove("data") {
            Some(Value::Object(d)) => d,
            Some(_) => return Err(DumpError::shape(path, "\"data\" must be an object")),
            None => return Err(DumpError::shape(path, "no \"data\" key")),
        };
        for (name, entry) in &data {
            if !(entry.is_object() || entry.is_null()) {
                return Err(DumpError::shape(
                    path,
                    format!("entry \"{name}\" must be an object"),
                ));
            }
        }
        let text = |key: &str| top.get(key).and_then(Value::as_str).map(str::to_string);
        Ok(DumpFile {
            path: path.to_path_buf(),
            task: text("task").unwrap_or_default(),
            level: text("level").unwrap_or_default(),
            framework: text("framework").unwrap_or_else(|| "pytorch".into()),
            dump_data_dir: text("dump_data_dir"),
            data,
        })
    }

    /// `true` when any tensor leaf carries an `md5` key (msprobe's md5 summary mode).
    pub fn has_md5(&self) -> bool {
        fn walk(v: &Value) -> bool {
            match v {
                Value::Object(m) => {
                    if m.get("type").is_some_and(Value::is_string) {
                        return m.contains_key("md5");
                    }
                    m.values().any(walk)
                }
                Value::Array(a) => a.iter().any(walk),
                _ => false,
            }
        }
        self.data.values().any(walk)
    }
}
