//! `dump.json`: the per-op statistics of one rank.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::confine::Confine;
use crate::error::DumpError;
use crate::json::{read_json_file, Members, PythonJsonReader};

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
    /// Whether the file has a `data` key. msprobe's graph builder reads a dump without one as
    /// empty (`dump.get("data", {})`); its compare refuses it (`check_dump_json_key`).
    pub has_data: bool,
}

impl DumpFile {
    /// Reads and checks `dump.json`.
    pub fn read(path: &Path, confine: &Confine) -> Result<DumpFile, DumpError> {
        let value = read_json_file(path, confine)?;
        Self::from_value(path, value)
    }

    /// Reads `dump.json` one entry at a time: `visit(name, entry)` gets every entry of `data`
    /// in file order and the returned `DumpFile` has an empty `data`. Peak memory is one entry,
    /// not the whole parsed file.
    pub fn read_streaming(
        path: &Path,
        confine: &Confine,
        visit: &mut dyn FnMut(String, Value),
    ) -> Result<DumpFile, DumpError> {
        // Streamed through the rewrite of Python's tokens: one entry at a time in memory,
        // never the file.
        let file = confine.open(path)?;
        let reader = PythonJsonReader::buffered(file);
        let mut de = serde_json::Deserializer::from_reader(reader);
        let header = serde::de::DeserializeSeed::deserialize(TopSeed { visit, path }, &mut de)
            .and_then(|h| de.end().map(|()| h))
            .map_err(|source| {
                if source.is_data() {
                    DumpError::shape(path, source.to_string())
                } else {
                    DumpError::Json {
                        path: path.to_path_buf(),
                        source,
                    }
                }
            })?;
        let text = |v: Option<Value>| v.and_then(|v| v.as_str().map(str::to_string));
        Ok(DumpFile {
            path: path.to_path_buf(),
            task: text(header.task).unwrap_or_default(),
            level: text(header.level).unwrap_or_default(),
            framework: text(header.framework).unwrap_or_else(|| "pytorch".into()),
            dump_data_dir: text(header.dump_data_dir),
            data: Map::new(),
            has_data: header.has_data,
        })
    }

    /// Reads `dump.json` with the fast reader ([`crate::fastjson`]), handing over the entries
    /// of `data` unparsed, in file order, in batches of about `batch_bytes` of JSON, so that the
    /// caller can parse a batch on several threads. `Ok(None)` when the fast reader does not
    /// accept the file (bad JSON, an unexpected shape, or an entry the caller could not parse:
    /// it returns the batch's error): the caller then uses [`DumpFile::read_streaming`], which
    /// reports the problem (or reads what the fast reader could not).
    pub fn read_fast_batches(
        path: &Path,
        confine: &Confine,
        batch_bytes: usize,
        on_batch: &mut dyn FnMut(
            &mut crate::fastjson::EntryBatch,
        ) -> Result<(), crate::fastjson::FastError>,
    ) -> Result<Option<DumpFile>, DumpError> {
        let file = confine.open(path)?;
        let Ok(h) = crate::fastjson::read_dump_batches(file, batch_bytes, on_batch) else {
            return Ok(None);
        };
        Ok(Some(DumpFile {
            path: path.to_path_buf(),
            task: h.task.unwrap_or_default(),
            level: h.level.unwrap_or_default(),
            framework: h.framework.unwrap_or_else(|| "pytorch".into()),
            dump_data_dir: h.dump_data_dir,
            data: Map::new(),
            has_data: h.has_data,
        }))
    }

    /// Checks the shape of an already parsed `dump.json`.
    pub fn from_value(path: &Path, value: Value) -> Result<DumpFile, DumpError> {
        let Value::Object(mut top) = value else {
            return Err(DumpError::shape(
                path,
                "expected a JSON object at the top level",
            ));
        };
        let has_data = top.contains_key("data");
        let data = match top.remove("data") {
            Some(Value::Object(d)) => d,
            Some(_) => return Err(DumpError::shape(path, "\"data\" must be an object")),
            None => Map::new(),
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
            has_data,
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

/// `true` when any tensor leaf of one entry carries an `md5` key.
pub fn entry_has_md5(v: &Value) -> bool {
    match v {
        Value::Object(m) => {
            if m.get("type").is_some_and(Value::is_string) {
                return m.contains_key("md5");
            }
            m.values().any(entry_has_md5)
        }
        Value::Array(a) => a.iter().any(entry_has_md5),
        _ => false,
    }
}

/// [`entry_has_md5`] of an entry of the fast reader.
pub fn jval_has_md5(v: &crate::fastjson::JVal) -> bool {
    use crate::fastjson::JVal;
    match v {
        JVal::Obj(m) => {
            if v.get("type").is_some_and(JVal::is_string) {
                return m.iter().any(|(k, _)| k == "md5");
            }
            m.iter().any(|(_, x)| jval_has_md5(x))
        }
        JVal::Arr(_) | JVal::LazyArr(_) => v.elements().any(|x| jval_has_md5(&x)),
        _ => false,
    }
}

#[derive(Default)]
struct Header {
    task: Option<Value>,
    level: Option<Value>,
    framework: Option<Value>,
    dump_data_dir: Option<Value>,
    has_data: bool,
}

struct TopSeed<'a> {
    visit: &'a mut dyn FnMut(String, Value),
    path: &'a Path,
}

impl<'de> serde::de::DeserializeSeed<'de> for TopSeed<'_> {
    type Value = Header;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Header, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for TopSeed<'_> {
    type Value = Header;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "a JSON object at the top level of {}",
            self.path.display()
        )
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Header, A::Error> {
        let mut h = Header::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "data" => {
                    let visit = &mut *self.visit;
                    map.next_value_seed(Members {
                        expecting: "\"data\" to be an object of op entries",
                        visit: &mut |key, value| {
                            if !(value.is_object() || value.is_null()) {
                                return Err(format!("entry \"{key}\" must be an object"));
                            }
                            visit(key, value);
                            Ok(true)
                        },
                    })?;
                    h.has_data = true;
                }
                "task" => h.task = Some(map.next_value()?),
                "level" => h.level = Some(map.next_value()?),
                "framework" => h.framework = Some(map.next_value()?),
                "dump_data_dir" => h.dump_data_dir = Some(map.next_value()?),
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_reader_visits_entries_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("dump.json");
        std::fs::write(
            &p,
            r#"{"task": "statistics", "data": {"b": {"output": [{"type": "torch.Tensor", "Max": NaN}]}, "a": {}}, "framework": "mindspore"}"#,
        )
        .unwrap();
        let mut names = Vec::new();
        let d =
            DumpFile::read_streaming(&p, &Confine::anywhere(), &mut |k, _| names.push(k)).unwrap();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(d.task, "statistics");
        assert_eq!(d.framework, "mindspore");
        std::fs::write(&p, r#"{"data": {"x": 3}}"#).unwrap();
        let err = DumpFile::read_streaming(&p, &Confine::anywhere(), &mut |_, _| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"x\""), "{err}");
        std::fs::write(&p, r#"[1]"#).unwrap();
        assert!(DumpFile::read_streaming(&p, &Confine::anywhere(), &mut |_, _| {}).is_err());
        std::fs::write(&p, r#"{"data": {"x": {"#).unwrap();
        let err = DumpFile::read_streaming(&p, &Confine::anywhere(), &mut |_, _| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("not valid JSON"), "{err}");
    }
}
