//! One side: its dump entries, their scopes and the scope trie.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::error::LayerMappingError;
use super::rules::{Rules, TOP_LAYER};
use crate::rank_dump::RankDump;

const PARAMS_GRAD: &str = "parameters_grad";
/// Path fragments of framework files (`Const.FRAME_FILE_LIST`).
const FRAMEWORK_FILES: [&str; 4] = [
    "site-packages/torch",
    "package/torch",
    "site-packages/mindspore",
    "package/mindspore",
];
/// Frames from these files are not scope parts (`Const.FILE_SKIP_LIST`).
const SKIPPED_FILES: [&str; 2] = ["msprobe", "MindSpeed"];
/// Frames of these functions are not scope parts (`Const.FUNC_SKIP_LIST`).
const SKIPPED_FUNCS: [&str; 2] = ["construct", "__call__"];

/// A dump entry placed in the scope trie.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) name: String,
    /// `forward`, `backward`, `parameters_grad`, …
    pub(super) direction: String,
    /// The class of a module, the API name of an API.
    pub(super) class: String,
    /// Dotted scope, starting with a top word (`Module`, `Cell`, `TopLayer`, …) that the trie
    /// skips.
    pub(super) scope: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Framework {
    PyTorch,
    MindSpore,
}

impl Entry {
    /// Splits a dump name into direction, class and short name, then builds its scope from its
    /// parent (`construct.json`) and its raw `stack.json` value.
    pub(super) fn new(
        name: &str,
        parent: Option<&str>,
        stack: Option<&Value>,
        framework: Framework,
    ) -> Result<Entry, LayerMappingError> {
        let parts: Vec<&str> = name.split('.').collect();
        let n = parts.len();
        if n < 4 {
            return Err(LayerMappingError::Scope(format!(
                "dump entry {name:?} has fewer than the four dotted fields layer mapping needs"
            )));
        }
        let is_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let kind = if parts[n - 1] == PARAMS_GRAD {
            Kind::ParamsGrad { shift: 0 }
        } else if parts[n - 2] == PARAMS_GRAD && is_digits(parts[n - 1]) {
            Kind::ParamsGrad { shift: 1 }
        } else if matches!(parts[0], "Cell" | "Module") {
            Kind::Module
        } else {
            Kind::Api
        };
        // (direction, class, short name, the fields whose all but last three are the scope)
        let (direction, class, short, scope_fields): (&str, &str, &str, Vec<&str>) = match kind {
            // Old dumps: `<path>.<attr>.<Class>.parameters_grad[.<n>]`.
            Kind::ParamsGrad { shift } => (
                PARAMS_GRAD,
                parts[n - 2 - shift],
                parts[n - 3 - shift],
                parts.clone(),
            ),
            // `Module.<path>.<attr>.<Class>.<dir>.<n>`: the scope is the path and attribute.
            Kind::Module => {
                let mut f = parts[..n - 4].to_vec();
                f.extend_from_slice(&parts[n - 3..]);
                (parts[n - 2], parts[n - 3], parts[n - 4], f)
            }
            // `<Type>.<api>.<n>.<dir>`: the scope is the parent module's.
            Kind::Api => {
                let f = match parent {
                    Some(p) if !p.is_empty() => p.split('.').collect(),
                    _ => Vec::new(),
                };
                (parts[n - 1], parts[n - 3], parts[n - 3], f)
            }
        };
        if let Some(p) = parent {
            if p.contains('.') && p.split('.').count() < 4 {
                return Err(LayerMappingError::Scope(format!(
                    "parent {p:?} of {name:?} has fewer than four dotted fields"
                )));
            }
        }
        let mut scope = if scope_fields.is_empty() {
            TOP_LAYER.to_string()
        } else {
            scope_fields[..scope_fields.len().saturating_sub(3)].join(".")
        };
        // Modules have no stack; neither do the framework's own graph calls.
        if kind != Kind::Module && !matches!(parts[0], "Primitive" | "Jit") {
            if let Some(frames) = stack_frames(name, stack)? {
                let func = frame_function(&frames, framework)?;
                if !func.is_empty() {
                    scope.push('.');
                    scope.push_str(&func);
                }
            }
        }
        scope.push('.');
        scope.push_str(short);
        Ok(Entry {
            name: name.to_string(),
            direction: direction.to_string(),
            class: class.to_string(),
            scope,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Kind {
    Module,
    Api,
    /// `shift` is 1 for names with a trailing counter.
    ParamsGrad {
        shift: usize,
    },
}

/// The frames of a raw `stack.json` value; `None` when it is absent or falsy (as msprobe tests
/// it), an error when it is not a list of strings.
pub(super) fn stack_frames(
    name: &str,
    stack: Option<&Value>,
) -> Result<Option<Vec<String>>, LayerMappingError> {
    let list = match stack {
        None | Some(Value::Null) | Some(Value::Bool(false)) => return Ok(None),
        Some(Value::String(s)) if s.is_empty() => return Ok(None),
        Some(Value::Object(o)) if o.is_empty() => return Ok(None),
        Some(Value::Number(x)) if x.as_f64() == Some(0.0) => return Ok(None),
        Some(Value::Array(a)) if a.is_empty() => return Ok(None),
        Some(Value::Array(a)) => a,
        Some(_) => {
            return Err(LayerMappingError::Scope(format!(
                "stack of {name:?} must be a list of strings"
            )))
        }
    };
    list.iter()
        .map(|f| match f {
            Value::String(s) => Ok(s.clone()),
            _ => Err(LayerMappingError::Scope(format!(
                "stack of {name:?} must be a list of strings"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The framework function an API was called from: within the frames between the wrapper
/// (`Template`) and the module's `forward`/`backward` (`construct` for MindSpore), the last of
/// the leading framework frames.
pub(super) fn frame_function(
    frames: &[String],
    framework: Framework,
) -> Result<String, LayerMappingError> {
    let ends_region = |f: &str| match framework {
        Framework::PyTorch => f.contains("in forward,") || f.contains("in backward,"),
        Framework::MindSpore => f.contains("construct"),
    };
    let mut start: Option<usize> = None;
    let mut end = frames.len();
    for (i, f) in frames.iter().enumerate() {
        if f.contains("Template") {
            start = Some(i);
        } else if start.is_some() && ends_region(f) {
            end = i;
            break;
        }
    }
    let from = start.map_or(0, |s| s + 1);
    let region = frames.get(from..end).unwrap_or_default();
    let file_of = |f: &str| f.split(',').next().unwrap_or_default().to_string();
    let lead = region
        .iter()
        .take_while(|f| FRAMEWORK_FILES.iter().any(|p| file_of(f).contains(p)))
        .count();
    // msprobe also reads the user frames that follow (and fails on malformed ones) although
    // only the framework frame becomes part of the scope.
    for f in &region[lead..] {
        frame_name(f)?;
    }
    match lead.checked_sub(1).map(|i| &region[i]) {
        Some(f) => Ok(frame_name(f)?.unwrap_or_default()),
        None => Ok(String::new()),
    }
}

/// The function name of a frame `File <path>, line <n>, in <func>, …`; `None` for frames of
/// skipped files and functions.
pub(super) fn frame_name(frame: &str) -> Result<Option<String>, LayerMappingError> {
    if frame.is_empty() {
        return Ok(None);
    }
    let fields: Vec<&str> = frame.split(',').collect();
    if SKIPPED_FILES.iter().any(|s| fields[0].contains(s)) {
        return Ok(None);
    }
    let Some(func) = fields.get(2) else {
        return Err(LayerMappingError::Scope(format!(
            "stack frame {frame:?} has no function field"
        )));
    };
    if SKIPPED_FUNCS.iter().any(|s| func.contains(s)) {
        return Ok(None);
    }
    match func.split_whitespace().nth(1) {
        Some(name) => Ok(Some(name.to_string())),
        None => Err(LayerMappingError::Scope(format!(
            "stack frame {frame:?} has no function name"
        ))),
    }
}

/// Backward entries have no stack: they take the scope of their forward twin (the same name with
/// `backward` → `forward` in the last two fields).
pub(super) fn borrow_forward_scopes(entries: &mut [Entry]) {
    let index: HashMap<String, usize> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (e.name.clone(), i))
        .collect();
    for i in 0..entries.len() {
        let parts: Vec<&str> = entries[i].name.split('.').collect();
        let tail = parts.len().saturating_sub(2);
        if !parts[tail..].contains(&"backward") {
            continue;
        }
        let mut twin: Vec<String> = parts[..tail].iter().map(|s| s.to_string()).collect();
        twin.extend(
            parts[tail..]
                .iter()
                .map(|s| s.replace("backward", "forward")),
        );
        if let Some(&j) = index.get(&twin.join(".")) {
            entries[i].scope = entries[j].scope.clone();
        }
    }
}

/// The scope field right after `<prefix>.` (msprobe: `^<prefix>\.(\S+?)(?:\.|$)`).
pub(super) fn next_field<'a>(scope: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = scope.strip_prefix(prefix)?.strip_prefix('.')?;
    // The shortest run of non-blank characters (at least one) followed by `.` or the end.
    let mut end = None;
    for (i, c) in rest.char_indices() {
        if c.is_whitespace() {
            return None;
        }
        if i > 0 && c == '.' {
            end = Some(i);
            break;
        }
    }
    let field = &rest[..end.unwrap_or(rest.len())];
    (!field.is_empty()).then_some(field)
}

/// The last run of digits of a field, as a number.
pub(super) fn last_number(field: &str) -> Option<i128> {
    let bytes = field.as_bytes();
    let end = bytes.iter().rposition(u8::is_ascii_digit)? + 1;
    let start = bytes[..end]
        .iter()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |p| p + 1);
    field[start..end].parse().ok()
}

/// Renumbers the `layers` of every `ParallelTransformer` from 0 (MindSpore numbers them
/// globally across pipeline stages, PyTorch locally).
pub(super) fn renumber_parallel_layers(entries: &mut [Entry]) {
    const CLASS: &str = "ParallelTransformer";
    let mut prefixes: Vec<String> = Vec::new();
    for e in entries.iter().filter(|e| e.class == CLASS) {
        let p = format!("{}.layers", e.scope);
        if !prefixes.contains(&p) {
            prefixes.push(p);
        }
    }
    // The smallest index under each prefix, over the scopes as they were before renumbering.
    let lowest: Vec<Option<i128>> = prefixes
        .iter()
        .map(|p| {
            entries
                .iter()
                .filter_map(|e| next_field(&e.scope, p).and_then(last_number))
                .min()
        })
        .collect();
    for (prefix, lowest) in prefixes.iter().zip(lowest) {
        for e in entries.iter_mut() {
            let Some(field) = next_field(&e.scope, prefix) else {
                continue;
            };
            // msprobe computes with floats: a field without digits is `inf`, and so is the
            // lowest index when no field has one; `inf - x` keeps the field, `inf - inf` writes
            // `nan`.
            let new_field = match (last_number(field), lowest) {
                (Some(n), Some(low)) => (n - low).to_string(),
                (None, None) => "nan".to_string(),
                _ => continue,
            };
            let rest = &e.scope[prefix.len() + 1 + field.len()..];
            e.scope = format!("{prefix}.{new_field}{rest}");
        }
    }
}

pub(super) const ROOT: usize = 0;

#[derive(Debug, Clone)]
pub(super) struct TrieNode {
    pub(super) class: String,
    pub(super) children: HashMap<String, usize>,
    /// Entries (indexes into [`Side::entries`]) per direction, in dump order.
    pub(super) entries: HashMap<String, Vec<usize>>,
}

impl TrieNode {
    pub(super) fn new(class: &str) -> TrieNode {
        TrieNode {
            class: class.to_string(),
            children: HashMap::new(),
            entries: HashMap::new(),
        }
    }
}

/// The dump entries of one side and the trie of their scopes.
#[derive(Debug, Clone)]
pub struct Side {
    pub(super) entries: Vec<Entry>,
    /// Position of each entry in its trie node's list for its direction.
    pub(super) positions: Vec<usize>,
    pub(super) trie: Vec<TrieNode>,
}

impl Side {
    /// The side of a rank folder: `dump.json` names (in order), `construct.json` parents and
    /// the raw `stack.json`.
    pub fn read(dump: &RankDump) -> Result<Side, LayerMappingError> {
        let dump_path = dump.dir.join("dump.json");
        let (names, framework) = read_names(&dump_path, &dump.confine)?;
        let stack_path = dump.dir.join("stack.json");
        let stacks = RawStacks::read(&stack_path, &dump.confine)?;
        let parents: HashMap<&str, Option<&str>> = dump.construct.entries.iter().collect();
        if stacks.is_empty || parents.is_empty() {
            // msprobe makes no entries at all then: every node looks for its own id.
            return Ok(Side::from_entries(Vec::new()));
        }
        let mut entries = Vec::with_capacity(names.len());
        for name in &names {
            let parent = parents.get(name.as_str()).copied().flatten();
            let e = Entry::new(name, parent, stacks.by_name.get(name), framework).map_err(|e| {
                LayerMappingError::Dump {
                    path: dump_path.clone(),
                    message: e.to_string(),
                }
            })?;
            entries.push(e);
        }
        Ok(Side::from_entries(entries))
    }

    pub(super) fn from_entries(mut entries: Vec<Entry>) -> Side {
        borrow_forward_scopes(&mut entries);
        renumber_parallel_layers(&mut entries);
        let mut side = Side {
            positions: Vec::with_capacity(entries.len()),
            entries: Vec::new(),
            trie: vec![TrieNode::new(TOP_LAYER)],
        };
        for (i, e) in entries.iter().enumerate() {
            let mut node = ROOT;
            for part in e.scope.split('.').skip(1) {
                node = match side.trie[node].children.get(part) {
                    Some(&c) => c,
                    None => {
                        let c = side.trie.len();
                        side.trie.push(TrieNode::new(part));
                        side.trie[node].children.insert(part.to_string(), c);
                        c
                    }
                };
            }
            let list = side.trie[node]
                .entries
                .entry(e.direction.clone())
                .or_default();
            side.positions.push(list.len());
            list.push(i);
            side.trie[node].class = e.class.clone();
        }
        side.entries = entries;
        side
    }

    /// The scope of entry `i` with each child name rewritten by the rules of its parent's class.
    pub(super) fn translate(&self, i: usize, rules: &Rules) -> Result<String, LayerMappingError> {
        let e = &self.entries[i];
        let parts: Vec<&str> = e.scope.split('.').collect();
        let mut out = String::from(TOP_LAYER);
        let mut node = ROOT;
        let mut k = 1;
        while k < parts.len() {
            let class = &self.trie[node].class;
            let rule = rules.for_child(class, parts[k]).iter().find(|r| {
                parts
                    .get(k..k + r.from.len())
                    .is_some_and(|p| p.iter().eq(r.from.iter()))
            });
            let (to, levels) = match rule {
                Some(r) => (r.to.as_str(), r.from.len()),
                None => (parts[k], 1),
            };
            out.push('.');
            out.push_str(to);
            for _ in 0..levels {
                node = *self.trie[node].children.get(parts[k]).ok_or_else(|| {
                    LayerMappingError::Scope(format!(
                        "scope {:?} of {:?} is not in its trie",
                        e.scope, e.name
                    ))
                })?;
                k += 1;
            }
        }
        Ok(out)
    }

    /// The entry at `scope` for `direction` and position `pos`.
    pub(super) fn lookup(&self, scope: &str, direction: &str, pos: usize) -> Option<&str> {
        let mut node = ROOT;
        for part in scope.split('.').skip(1) {
            node = *self.trie[node].children.get(part)?;
        }
        let list = self.trie[node].entries.get(direction)?;
        list.get(pos).map(|&i| self.entries[i].name.as_str())
    }
}

/// Reads the `data` names of a `dump.json` in file order, and msprobe's framework of the dump
/// (the `framework` field when it says `pytorch` or `mindspore`, else the first tensor type).
pub(super) fn read_names(
    path: &Path,
    confine: &graph_ascend_dump::Confine,
) -> Result<(Vec<String>, Framework), LayerMappingError> {
    #[derive(Deserialize)]
    struct Head {
        #[serde(default)]
        framework: Option<Value>,
        #[serde(default)]
        data: Names,
    }
    #[derive(Default)]
    struct Names(Vec<String>);
    impl<'de> Deserialize<'de> for Names {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Names;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object of dump entries")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Names, A::Error> {
                    let mut names = Vec::new();
                    while let Some(k) = map.next_key::<String>()? {
                        map.next_value::<serde::de::IgnoredAny>()?;
                        names.push(k);
                    }
                    Ok(Names(names))
                }
            }
            d.deserialize_map(V)
        }
    }
    let dump_error = |message: String| LayerMappingError::Dump {
        path: path.to_path_buf(),
        message,
    };
    let bytes = graph_ascend_dump::json::read_python_json_bytes(path, confine)
        .map_err(|e| dump_error(e.to_string()))?;
    let head: Head = serde_json::from_slice(&bytes).map_err(|e| dump_error(e.to_string()))?;
    let framework = match head.framework.as_ref().and_then(Value::as_str) {
        Some("pytorch") => Framework::PyTorch,
        Some("mindspore") => Framework::MindSpore,
        _ => framework_from_types(&bytes).ok_or_else(|| {
            dump_error("must be based on the MindSpore or PyTorch framework".into())
        })?,
    };
    Ok((head.data.0, framework))
}

/// msprobe's fallback: the first line holding `"type": "mindspore…` or `"type": "torch…`.
pub(super) fn framework_from_types(bytes: &[u8]) -> Option<Framework> {
    let after_type = |line: &[u8], word: &[u8]| -> bool {
        let key = b"\"type\":";
        line.windows(key.len()).enumerate().any(|(i, w)| {
            if w != key {
                return false;
            }
            let rest = &line[i + key.len()..];
            let start = rest
                .iter()
                .position(|b| !b.is_ascii_whitespace())
                .unwrap_or(rest.len());
            rest[start..].starts_with(b"\"") && rest[start + 1..].starts_with(word)
        })
    };
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        if after_type(line, b"mindspore") {
            return Some(Framework::MindSpore);
        }
        if after_type(line, b"torch") {
            return Some(Framework::PyTorch);
        }
    }
    None
}

/// `stack.json` as msprobe's layer mapping reads it: a plain `{name: frames}` lookup, which finds
/// nothing in the new `{"0": [[names], [frames]]}` form.
pub(super) struct RawStacks {
    pub(super) is_empty: bool,
    pub(super) by_name: serde_json::Map<String, Value>,
}

impl RawStacks {
    pub(super) fn read(
        path: &Path,
        confine: &graph_ascend_dump::Confine,
    ) -> Result<RawStacks, LayerMappingError> {
        let value = graph_ascend_dump::json::read_json_file(path, confine).map_err(|e| {
            LayerMappingError::Dump {
                path: path.to_path_buf(),
                message: e.to_string(),
            }
        })?;
        let Value::Object(map) = value else {
            return Err(LayerMappingError::Dump {
                path: path.to_path_buf(),
                message: "expected a JSON object".into(),
            });
        };
        Ok(RawStacks {
            is_empty: map.is_empty(),
            by_name: map,
        })
    }
}
