//! Layer mapping (`-lm [YAML]`): msprobe's scope-based pairing of target and golden dump entries
//! (`msprobe/core/compare/layer_mapping`).
//!
//! Every entry of each side's `dump.json` gets a *scope*: the dotted module path it ran under
//! (from its own name for modules and parameter gradients, from its parent in `construct.json` for
//! APIs), then — with old-form `stack.json` only — the framework function that called it, then its
//! own short name. Backward entries borrow the scope of their forward twin, and the `layers` of a
//! `ParallelTransformer` are renumbered from 0 (pipeline stages number them globally). The scopes
//! of a side form a trie; each trie node remembers its class (the type name of the last entry put
//! there) and, per direction (`forward`, `backward`, `parameters_grad`, …), the entries in dump
//! order.
//!
//! A target entry is translated by walking its scope down the target trie: at each step the
//! child's name is rewritten by the YAML rules of the current node's class (`{Class: {child:
//! golden_child}}`, where the child may span several levels, `a.b.c: new_c`; the old class key
//! `Cell` stands for the top level, `TopLayer`). The golden entry is the one at the translated scope
//! with the same direction and the same position. A bare `-lm` is the same walk with no rules,
//! which pairs entries by scope and position alone.
//!
//! Graph nodes are then matched by id through that table: a node whose id is a dumped target entry
//! takes its golden entry (or nothing when there is none); any other node (modules only present in
//! `construct.json`, `Apis_Between_Modules`, the root) looks for its own id. No ancestor check.
//!
//! Like msprobe, a mapping file whose content is not a mapping of mappings of strings, and dumps
//! whose names break the scope rules, do not stop the conversion: the mapping is dropped (a warning
//! says so) and every node looks for its own id. Unlike msprobe, a mapping file that is missing,
//! unreadable or not named `*.yaml` is an error naming it (msprobe warns and goes on without it).
//!
//! msprobe reads `stack.json` raw here: in the new form (`{"0": [[names], [frames]]}`, written by
//! every recent msprobe) no entry finds its frames, so scopes carry no function part. We do the
//! same.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::graph::Graph;
use crate::{ConvertError, LayerMapping, RankDump};

/// The top of every scope (`Const.TOP_LAYER`).
const TOP_LAYER: &str = "TopLayer";
/// The old name of the top level in mapping files (`Const.CELL`).
const OLD_TOP_KEY: &str = "Cell";
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

/// Why a mapping could not be made. `File` stops the conversion; `Dump` makes msprobe drop the
/// mapping with a warning (as does unusable file content, reported as text by [`load_rules`]).
#[derive(Debug, thiserror::Error)]
pub enum LayerMappingError {
    /// The mapping file is missing, unreadable or not a `.yaml` file.
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    /// A dump entry or its stack does not fit msprobe's naming rules.
    #[error("{path}: {message}")]
    Dump { path: PathBuf, message: String },
}

impl From<LayerMappingError> for ConvertError {
    fn from(e: LayerMappingError) -> Self {
        match e {
            LayerMappingError::File { path, message }
            | LayerMappingError::Dump { path, message } => ConvertError::Input { path, message },
        }
    }
}

// ------------------------------------------------------------------------------------------------
// The mapping file.

/// One rewrite: the child path `from` (one or more levels) under a class becomes `to`.
#[derive(Debug, Clone, PartialEq)]
struct Rule {
    from: Vec<String>,
    to: String,
}

/// The rules of a mapping file: class → first child name → rules, longest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules {
    by_class: HashMap<String, HashMap<String, Vec<Rule>>>,
}

impl Rules {
    /// The rules of a YAML text. `Err` says why the text is not a mapping of mappings of
    /// strings (msprobe then drops the mapping).
    pub fn parse(text: &str) -> Result<Rules, String> {
        let doc: Yaml = serde_norway::from_str(text).map_err(|e| format!("not valid YAML: {e}"))?;
        let Yaml::Map(top) = doc else {
            return Err(format!(
                "expected a mapping {{Class: {{child: golden_child}}}}, found {}",
                doc.describe()
            ));
        };
        let mut top = dedup(top);
        // `Cell` is the old name of the top level: a non-null `Cell` replaces `TopLayer`.
        if let Some(i) = top.iter().position(|(k, _)| k.text() == Some(OLD_TOP_KEY)) {
            let (_, old_top) = top.remove(i);
            if !matches!(old_top, Yaml::Null) {
                match top.iter_mut().find(|(k, _)| k.text() == Some(TOP_LAYER)) {
                    Some((_, v)) => *v = old_top,
                    None => top.push((Yaml::Text(TOP_LAYER.into()), old_top)),
                }
            }
        }
        let mut rules = Rules::default();
        for (class, children) in top {
            let Yaml::Map(children) = children else {
                return Err(format!(
                    "the rules of {} must be a mapping {{child: golden_child}}, found {}",
                    class.describe(),
                    children.describe()
                ));
            };
            let mut by_first: HashMap<String, Vec<Rule>> = HashMap::new();
            for (from, to) in dedup(children) {
                let (Some(from_text), Some(to_text)) = (from.text(), to.text()) else {
                    return Err(format!(
                        "{}: rule {} -> {} is not text -> text",
                        class.describe(),
                        from.describe(),
                        to.describe()
                    ));
                };
                let from: Vec<String> = from_text.split('.').map(str::to_string).collect();
                // A target may carry a call suffix, `name(...)`: only the name counts.
                let to = to_text.split('(').next().unwrap_or_default().to_string();
                by_first
                    .entry(from[0].clone())
                    .or_default()
                    .push(Rule { from, to });
            }
            for list in by_first.values_mut() {
                // Longest rule first; equal lengths keep the file's order.
                list.sort_by_key(|r| std::cmp::Reverse(r.from.len()));
            }
            // Only text class names can ever match a scope's class.
            if let Some(name) = class.text() {
                rules.by_class.insert(name.to_string(), by_first);
            }
        }
        Ok(rules)
    }

    /// The rules for `child` under a node of class `class`, longest first.
    fn for_child(&self, class: &str, child: &str) -> &[Rule] {
        self.by_class
            .get(class)
            .and_then(|m| m.get(child))
            .map_or(&[], Vec::as_slice)
    }
}

/// A YAML node, as much of it as the rules need. Mappings keep their entries in file order and
/// keep duplicate keys (PyYAML lets a later one replace an earlier one, see [`dedup`]).
#[derive(Debug, Clone, PartialEq)]
enum Yaml {
    Null,
    Text(String),
    Map(Vec<(Yaml, Yaml)>),
    /// Any other scalar or a list: its kind and, for scalars, its text.
    Other(&'static str, String),
}

impl Yaml {
    fn text(&self) -> Option<&str> {
        match self {
            Yaml::Text(s) => Some(s),
            _ => None,
        }
    }

    fn describe(&self) -> String {
        match self {
            Yaml::Null => "nothing".into(),
            Yaml::Text(s) => format!("{s:?}"),
            Yaml::Map(_) => "a mapping".into(),
            Yaml::Other(kind, text) if text.is_empty() => (*kind).into(),
            Yaml::Other(kind, text) => format!("{kind} {text}"),
        }
    }

    /// Identity of a mapping key, for duplicates.
    fn key_id(&self) -> Option<(&'static str, &str)> {
        match self {
            Yaml::Null => Some(("null", "")),
            Yaml::Text(s) => Some(("text", s)),
            Yaml::Other(kind, text) if !text.is_empty() => Some((kind, text)),
            _ => None,
        }
    }
}

/// PyYAML's mapping semantics: a repeated key keeps its first place and takes its last value.
fn dedup(entries: Vec<(Yaml, Yaml)>) -> Vec<(Yaml, Yaml)> {
    let mut out: Vec<(Yaml, Yaml)> = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        let same = k
            .key_id()
            .and_then(|id| out.iter().position(|(o, _)| o.key_id() == Some(id)));
        match same {
            Some(i) => out[i].1 = v,
            None => out.push((k, v)),
        }
    }
    out
}

impl<'de> Deserialize<'de> for Yaml {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Yaml;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a YAML value")
            }
            fn visit_unit<E>(self) -> Result<Yaml, E> {
                Ok(Yaml::Null)
            }
            fn visit_none<E>(self) -> Result<Yaml, E> {
                Ok(Yaml::Null)
            }
            fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Yaml, D::Error> {
                Yaml::deserialize(d)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Yaml, E> {
                Ok(Yaml::Other("a boolean", v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Yaml, E> {
                Ok(Yaml::Other("a number", v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Yaml, E> {
                Ok(Yaml::Other("a number", v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Yaml, E> {
                Ok(Yaml::Other("a number", v.to_string()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Yaml, E> {
                Ok(Yaml::Text(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<Yaml, E> {
                Ok(Yaml::Text(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Yaml, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Yaml::Other("a list", String::new()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Yaml, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = map.next_entry::<Yaml, Yaml>()? {
                    entries.push((k, v));
                }
                Ok(Yaml::Map(entries))
            }
        }
        d.deserialize_any(V)
    }
}

/// What `-lm` asks for: `Ok(rules)`, or the reason the file's content is ignored (msprobe's
/// warning case). A missing, unreadable or wrongly named file is an error.
pub fn load_rules(lm: &LayerMapping) -> Result<Result<Rules, String>, LayerMappingError> {
    let path = match lm {
        LayerMapping::None | LayerMapping::Bare => return Ok(Ok(Rules::default())),
        LayerMapping::File(p) => p,
    };
    let file_error = |message: String| LayerMappingError::File {
        path: path.clone(),
        message,
    };
    if !path.to_string_lossy().ends_with(".yaml") {
        return Err(file_error(
            "a layer mapping file must be a .yaml file (as msprobe requires)".into(),
        ));
    }
    let bytes = std::fs::read(path)
        .map_err(|e| file_error(format!("cannot read the layer mapping file: {e}")))?;
    let Ok(text) = String::from_utf8(bytes) else {
        return Ok(Err(format!("{}: not UTF-8 text", path.display())));
    };
    Ok(Rules::parse(&text).map_err(|why| format!("{}: {why}", path.display())))
}

/// Checks `-lm FILE` before any dump is read: an error for a missing or unreadable file, a
/// warning text (msprobe's "mapping is not effective") when its content cannot be used.
pub fn preflight(lm: &LayerMapping) -> Result<Option<String>, ConvertError> {
    Ok(load_rules(lm)?.err().map(|why| ignored_warning(&why)))
}

fn ignored_warning(why: &str) -> String {
    format!("the layer mapping could not be used, mapping is not effective: {why}")
}

// ------------------------------------------------------------------------------------------------
// One side: its dump entries, their scopes and the scope trie.

/// A dump entry placed in the scope trie.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    /// `forward`, `backward`, `parameters_grad`, …
    direction: String,
    /// The class of a module, the API name of an API.
    class: String,
    /// Dotted scope, starting with a top word (`Module`, `Cell`, `TopLayer`, …) that the trie
    /// skips.
    scope: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Framework {
    PyTorch,
    MindSpore,
}

impl Entry {
    /// Splits a dump name into direction, class and short name, then builds its scope from its
    /// parent (`construct.json`) and its raw `stack.json` value.
    fn new(
        name: &str,
        parent: Option<&str>,
        stack: Option<&Value>,
        framework: Framework,
    ) -> Result<Entry, String> {
        let parts: Vec<&str> = name.split('.').collect();
        let n = parts.len();
        if n < 4 {
            return Err(format!(
                "dump entry {name:?} has fewer than the four dotted fields layer mapping needs"
            ));
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
                return Err(format!(
                    "parent {p:?} of {name:?} has fewer than four dotted fields"
                ));
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
enum Kind {
    Module,
    Api,
    /// `shift` is 1 for names with a trailing counter.
    ParamsGrad {
        shift: usize,
    },
}

/// The frames of a raw `stack.json` value; `None` when it is absent or falsy (as msprobe tests
/// it), an error when it is not a list of strings.
fn stack_frames(name: &str, stack: Option<&Value>) -> Result<Option<Vec<String>>, String> {
    let list = match stack {
        None | Some(Value::Null) | Some(Value::Bool(false)) => return Ok(None),
        Some(Value::String(s)) if s.is_empty() => return Ok(None),
        Some(Value::Object(o)) if o.is_empty() => return Ok(None),
        Some(Value::Number(x)) if x.as_f64() == Some(0.0) => return Ok(None),
        Some(Value::Array(a)) if a.is_empty() => return Ok(None),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(format!("stack of {name:?} must be a list of strings")),
    };
    list.iter()
        .map(|f| match f {
            Value::String(s) => Ok(s.clone()),
            _ => Err(format!("stack of {name:?} must be a list of strings")),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The framework function an API was called from: within the frames between the wrapper
/// (`Template`) and the module's `forward`/`backward` (`construct` for MindSpore), the last of
/// the leading framework frames.
fn frame_function(frames: &[String], framework: Framework) -> Result<String, String> {
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
fn frame_name(frame: &str) -> Result<Option<String>, String> {
    if frame.is_empty() {
        return Ok(None);
    }
    let fields: Vec<&str> = frame.split(',').collect();
    if SKIPPED_FILES.iter().any(|s| fields[0].contains(s)) {
        return Ok(None);
    }
    let Some(func) = fields.get(2) else {
        return Err(format!("stack frame {frame:?} has no function field"));
    };
    if SKIPPED_FUNCS.iter().any(|s| func.contains(s)) {
        return Ok(None);
    }
    match func.split_whitespace().nth(1) {
        Some(name) => Ok(Some(name.to_string())),
        None => Err(format!("stack frame {frame:?} has no function name")),
    }
}

/// Backward entries have no stack: they take the scope of their forward twin (the same name with
/// `backward` → `forward` in the last two fields).
fn borrow_forward_scopes(entries: &mut [Entry]) {
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
fn next_field<'a>(scope: &'a str, prefix: &str) -> Option<&'a str> {
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
fn last_number(field: &str) -> Option<i128> {
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
fn renumber_parallel_layers(entries: &mut [Entry]) {
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

const ROOT: usize = 0;

#[derive(Debug, Clone)]
struct TrieNode {
    class: String,
    children: HashMap<String, usize>,
    /// Entries (indexes into [`Side::entries`]) per direction, in dump order.
    entries: HashMap<String, Vec<usize>>,
}

impl TrieNode {
    fn new(class: &str) -> TrieNode {
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
    entries: Vec<Entry>,
    /// Position of each entry in its trie node's list for its direction.
    positions: Vec<usize>,
    trie: Vec<TrieNode>,
}

impl Side {
    /// The side of a rank folder: `dump.json` names (in order), `construct.json` parents and
    /// the raw `stack.json`.
    pub fn read(dump: &RankDump) -> Result<Side, LayerMappingError> {
        let dump_path = dump.dir.join("dump.json");
        let (names, framework) = read_names(&dump_path)?;
        let stack_path = dump.dir.join("stack.json");
        let stacks = RawStacks::read(&stack_path)?;
        let parents: HashMap<&str, Option<&str>> = dump
            .construct
            .entries
            .iter()
            .map(|(n, p)| (n.as_str(), p.as_deref()))
            .collect();
        if stacks.is_empty || parents.is_empty() {
            // msprobe makes no entries at all then: every node looks for its own id.
            return Ok(Side::from_entries(Vec::new()));
        }
        let mut entries = Vec::with_capacity(names.len());
        for name in &names {
            let parent = parents.get(name.as_str()).copied().flatten();
            let e = Entry::new(name, parent, stacks.by_name.get(name), framework).map_err(
                |message| LayerMappingError::Dump {
                    path: dump_path.clone(),
                    message,
                },
            )?;
            entries.push(e);
        }
        Ok(Side::from_entries(entries))
    }

    fn from_entries(mut entries: Vec<Entry>) -> Side {
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
    fn translate(&self, i: usize, rules: &Rules) -> Result<String, String> {
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
                    format!("scope {:?} of {:?} is not in its trie", e.scope, e.name)
                })?;
                k += 1;
            }
        }
        Ok(out)
    }

    /// The entry at `scope` for `direction` and position `pos`.
    fn lookup(&self, scope: &str, direction: &str, pos: usize) -> Option<&str> {
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
fn read_names(path: &Path) -> Result<(Vec<String>, Framework), LayerMappingError> {
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
    let bytes = graph_ascend_dump::json::read_python_json_bytes(path)
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
fn framework_from_types(bytes: &[u8]) -> Option<Framework> {
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
struct RawStacks {
    is_empty: bool,
    by_name: serde_json::Map<String, Value>,
}

impl RawStacks {
    fn read(path: &Path) -> Result<RawStacks, LayerMappingError> {
        let value =
            graph_ascend_dump::json::read_json_file(path).map_err(|e| LayerMappingError::Dump {
                path: path.to_path_buf(),
                message: e.to_string(),
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

// ------------------------------------------------------------------------------------------------
// The mapping and the matching.

/// Target entry name → golden entry name (`None`: no golden entry at the translated scope).
pub type ApiMapping = HashMap<String, Option<String>>;

/// msprobe's `generate_api_mapping_by_layer_mapping` on two read sides.
pub fn api_mapping(npu: &Side, bench: &Side, rules: &Rules) -> Result<ApiMapping, String> {
    let mut out = HashMap::with_capacity(npu.entries.len());
    for (i, e) in npu.entries.iter().enumerate() {
        let scope = npu.translate(i, rules)?;
        let golden = bench
            .lookup(&scope, &e.direction, npu.positions[i])
            .map(str::to_string);
        out.insert(e.name.clone(), golden);
    }
    Ok(out)
}

/// The mapping of one target/golden rank pair, or an empty one (with a warning on stderr) when
/// msprobe would drop it. Errors only for a missing or unreadable mapping file.
pub fn mapping_for(
    lm: &LayerMapping,
    npu: &RankDump,
    bench: &RankDump,
) -> Result<ApiMapping, ConvertError> {
    // Content problems were already reported by `preflight`: the mapping is then empty.
    let Ok(rules) = load_rules(lm)? else {
        return Ok(ApiMapping::new());
    };
    let made = (|| {
        let n = Side::read(npu).map_err(|e| e.to_string())?;
        let b = Side::read(bench).map_err(|e| e.to_string())?;
        api_mapping(&n, &b, &rules)
    })();
    match made {
        Ok(m) => Ok(m),
        Err(why) => {
            eprintln!("graph-ascend: warning: {}", ignored_warning(&why));
            Ok(ApiMapping::new())
        }
    }
}

/// Pairs nodes through `mapping` (msprobe's `Graph.mapping_match`), breadth-first from the
/// target root: each side's link is the other side's ancestors and id.
pub fn match_graphs(npu: &mut Graph, bench: &mut Graph, mapping: &ApiMapping) {
    for n in npu.bfs() {
        let id = &npu.nodes[n].id;
        let golden = match mapping.get(id) {
            Some(Some(g)) => bench.get(g),
            Some(None) => None,
            None => bench.get(id),
        };
        let Some(b) = golden else {
            continue;
        };
        let mut npu_link = bench.ancestors(b);
        npu_link.push(bench.nodes[b].id.clone());
        let mut bench_link = npu.ancestors(n);
        bench_link.push(npu.nodes[n].id.clone());
        npu.nodes[n].matched = Some(b);
        npu.nodes[n].matched_link = npu_link;
        bench.nodes[b].matched = Some(n);
        bench.nodes[b].matched_link = bench_link;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(yaml: &str) -> Rules {
        Rules::parse(yaml).unwrap_or_else(|e| panic!("{e}"))
    }

    fn rule(from: &str, to: &str) -> Rule {
        Rule {
            from: from.split('.').map(str::to_string).collect(),
            to: to.into(),
        }
    }

    #[test]
    fn rules_group_by_first_field_longest_first() {
        let r = rules("A:\n  a.demo: new_demo\n  a.b.c: new_c(x, y)\n  z: new_z\n  d.e: e\n");
        assert_eq!(
            r.for_child("A", "a"),
            [rule("a.b.c", "new_c"), rule("a.demo", "new_demo")]
        );
        assert_eq!(r.for_child("A", "z"), [rule("z", "new_z")]);
        assert_eq!(r.for_child("A", "d"), [rule("d.e", "e")]);
        assert!(r.for_child("A", "e").is_empty());
        assert!(r.for_child("B", "a").is_empty());
    }

    #[test]
    fn cell_is_the_top_layer() {
        let r = rules("Cell:\n  a: b\n");
        assert_eq!(r.for_child(TOP_LAYER, "a"), [rule("a", "b")]);
        assert!(r.for_child("Cell", "a").is_empty());
        // `Cell` wins over `TopLayer`; a null `Cell` is dropped.
        let r = rules("TopLayer:\n  a: t\nCell:\n  a: c\n");
        assert_eq!(r.for_child(TOP_LAYER, "a"), [rule("a", "c")]);
        let r = rules("TopLayer:\n  a: t\nCell: null\n");
        assert_eq!(r.for_child(TOP_LAYER, "a"), [rule("a", "t")]);
    }

    #[test]
    fn duplicate_keys_keep_the_last_value() {
        let r = rules("B:\n  x: first\n  x: second\nB:\n  y: z\n");
        assert!(r.for_child("B", "x").is_empty());
        assert_eq!(r.for_child("B", "y"), [rule("y", "z")]);
        let r = rules("B:\n  x: first\n  x: second\n");
        assert_eq!(r.for_child("B", "x"), [rule("x", "second")]);
    }

    #[test]
    fn unusable_yaml_is_refused_with_a_reason() {
        for (text, needle) in [
            ("", "found nothing"),
            ("- a\n- b\n", "found a list"),
            ("just text", "found \"just text\""),
            ("Block: null\n", "rules of \"Block\""),
            ("Block: [a, b]\n", "found a list"),
            ("Block:\n  0: x\n", "rule a number 0"),
            ("Block:\n  a: 1\n", "not text -> text"),
            ("Block:\n  a: null\n", "not text -> text"),
            ("Block: {a: b\n", "not valid YAML"),
            ("a: b\n---\nc: d\n", "not valid YAML"),
        ] {
            let err = Rules::parse(text).expect_err(text);
            assert!(err.contains(needle), "{text:?}: {err:?} lacks {needle:?}");
        }
        // Non-text class names are allowed (they never match) when their rules are sound.
        assert_eq!(rules("1:\n  a: b\n"), Rules::default());
    }

    /// Expected values printed by msprobe 26.2.0's own `DumpDataItem.set` + `postprocess_pass`.
    #[test]
    fn scopes_as_msprobe_makes_them() {
        let frames = Value::Array(
            [
                "File /x/site-packages/torch/nn/modules/linear.py, line 1, in forward, \n a",
                "File /x/site-packages/torch/nn/modules/module.py, line 2, in _call_impl, \n b",
                "File /home/u/m.py, line 3, in forward, \n c",
            ]
            .map(|s| Value::String(s.into()))
            .to_vec(),
        );
        let cases: [(&str, Option<&str>, Option<&Value>); 13] = [
            ("Module.layers.0.attn.Attention.forward.0", None, None),
            (
                "Functional.linear.0.forward",
                Some("Module.layers.0.attn.qkv.Linear.forward.0"),
                Some(&frames),
            ),
            (
                "Functional.linear.0.backward",
                Some("Module.layers.0.attn.qkv.Linear.backward.0"),
                None,
            ),
            ("Torch.matmul.0.forward", None, None),
            ("Torch.add.1.forward", Some(""), None),
            (
                "Jit.foo.0.forward",
                Some("Module.a.A.forward.0"),
                Some(&frames),
            ),
            ("Module.fc.Linear.parameters_grad", None, None),
            ("Module.fc.Linear.parameters_grad.0", None, None),
            (
                "Cell.network.model.transformer.ParallelTransformer.forward.0",
                None,
                None,
            ),
            (
                "Cell.network.model.transformer.layers.4.attention.Attn.forward.0",
                None,
                None,
            ),
            (
                "Cell.network.model.transformer.layers.5.attention.Attn.forward.0",
                None,
                None,
            ),
            (
                "Mint.add.0.forward",
                Some("Cell.network.model.transformer.layers.5.attention.Attn.forward.0"),
                None,
            ),
            (
                "Cell.network.model.transformer.layers.x5y.Attn.forward.0",
                None,
                None,
            ),
        ];
        let mut entries: Vec<Entry> = cases
            .iter()
            .map(|(n, p, s)| Entry::new(n, *p, *s, Framework::PyTorch).unwrap())
            .collect();
        borrow_forward_scopes(&mut entries);
        renumber_parallel_layers(&mut entries);
        let got: Vec<(&str, &str, &str)> = entries
            .iter()
            .map(|e| (e.direction.as_str(), e.class.as_str(), e.scope.as_str()))
            .collect();
        let mt = "Cell.network.model.transformer";
        assert_eq!(
            got,
            [
                ("forward", "Attention", "Module.layers.0.attn"),
                (
                    "forward",
                    "linear",
                    "Module.layers.0.attn.qkv._call_impl.linear"
                ),
                (
                    "backward",
                    "linear",
                    "Module.layers.0.attn.qkv._call_impl.linear"
                ),
                ("forward", "matmul", "TopLayer.matmul"),
                ("forward", "add", "TopLayer.add"),
                ("forward", "foo", "Module.a.foo"),
                ("parameters_grad", "Linear", "Module.fc"),
                ("parameters_grad", "Linear", "Module.fc.fc"),
                ("forward", "ParallelTransformer", mt),
                ("forward", "Attn", &format!("{mt}.layers.0.attention")),
                ("forward", "Attn", &format!("{mt}.layers.1.attention")),
                ("forward", "add", &format!("{mt}.layers.1.attention.add")),
                ("forward", "Attn", &format!("{mt}.layers.1")),
            ]
        );
    }

    #[test]
    fn layers_without_any_index_become_nan() {
        let mut entries = vec![
            Entry::new(
                "Cell.t.ParallelTransformer.forward.0",
                None,
                None,
                Framework::MindSpore,
            )
            .unwrap(),
            Entry::new(
                "Cell.t.layers.first.A.forward.0",
                None,
                None,
                Framework::MindSpore,
            )
            .unwrap(),
        ];
        renumber_parallel_layers(&mut entries);
        assert_eq!(entries[1].scope, "Cell.t.layers.nan");
    }

    #[test]
    fn malformed_names_and_frames_are_errors() {
        assert!(Entry::new("Torch.add.forward", None, None, Framework::PyTorch).is_err());
        assert!(Entry::new(
            "Torch.add.0.forward",
            Some("Module.a"),
            None,
            Framework::PyTorch
        )
        .is_err());
        let bad = Value::Array(vec![Value::String("no commas here".into())]);
        assert!(Entry::new("Torch.add.0.forward", None, Some(&bad), Framework::PyTorch).is_err());
        let bad = Value::String("File a, line 1, in f".into());
        assert!(Entry::new("Torch.add.0.forward", None, Some(&bad), Framework::PyTorch).is_err());
        // Modules never look at their stack.
        assert!(Entry::new("Module.a.A.forward.0", None, Some(&bad), Framework::PyTorch).is_ok());
    }

    #[test]
    fn frame_region_starts_after_the_wrapper() {
        let frames: Vec<String> = [
            "File /p/msprobe/wrap.py, line 1, in api_Template, \n w",
            "File /p/site-packages/mindspore/ops/f.py, line 2, in add, \n x",
            "File /p/site-packages/mindspore/ops/g.py, line 3, in inner_op, \n y",
            "File /home/m.py, line 4, in helper, \n z",
            "File /home/m.py, line 5, in construct, \n z",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            frame_function(&frames, Framework::MindSpore).unwrap(),
            "inner_op"
        );
        // A skipped function leaves no function part.
        let frames: Vec<String> =
            ["File /p/site-packages/torch/nn/modules/module.py, line 1, in __call__, \n a"]
                .map(String::from)
                .to_vec();
        assert_eq!(frame_function(&frames, Framework::PyTorch).unwrap(), "");
    }

    fn side(names: &[(&str, Option<&str>)]) -> Side {
        Side::from_entries(
            names
                .iter()
                .map(|(n, p)| Entry::new(n, *p, None, Framework::PyTorch).unwrap())
                .collect(),
        )
    }

    #[test]
    fn entries_pair_by_translated_scope_and_position() {
        let npu = side(&[
            ("Module.blk.new_attn.Attention.forward.0", None),
            (
                "Torch.matmul.0.forward",
                Some("Module.blk.new_attn.Attention.forward.0"),
            ),
            (
                "Torch.matmul.1.forward",
                Some("Module.blk.new_attn.Attention.forward.0"),
            ),
            (
                "Torch.matmul.2.forward",
                Some("Module.blk.new_attn.Attention.forward.0"),
            ),
            ("Module.blk.Block.forward.0", None),
        ]);
        let bench = side(&[
            ("Module.blk.attn.Attention.forward.0", None),
            (
                "Torch.matmul.7.forward",
                Some("Module.blk.attn.Attention.forward.0"),
            ),
            (
                "Torch.matmul.8.forward",
                Some("Module.blk.attn.Attention.forward.0"),
            ),
            ("Module.blk.Block.forward.0", None),
        ]);
        let m = api_mapping(&npu, &bench, &rules("Block:\n  new_attn: attn\n")).unwrap();
        let get = |k: &str| m.get(k).cloned().flatten();
        assert_eq!(
            get("Module.blk.new_attn.Attention.forward.0").as_deref(),
            Some("Module.blk.attn.Attention.forward.0")
        );
        assert_eq!(
            get("Torch.matmul.1.forward").as_deref(),
            Some("Torch.matmul.8.forward")
        );
        assert_eq!(get("Torch.matmul.2.forward"), None);
        assert_eq!(
            get("Module.blk.Block.forward.0").as_deref(),
            Some("Module.blk.Block.forward.0")
        );
        // Without rules the renamed child finds nothing.
        let m = api_mapping(&npu, &bench, &Rules::default()).unwrap();
        assert_eq!(m["Torch.matmul.0.forward"], None);
    }
}
