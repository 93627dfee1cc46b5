//! The mapping file: its YAML read as msprobe reads it, and the rewrite rules it gives.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use super::error::LayerMappingError;
use crate::error::ConvertError;
use crate::options::LayerMapping;

/// The top of every scope (`Const.TOP_LAYER`).
pub(super) const TOP_LAYER: &str = "TopLayer";
/// The old name of the top level in mapping files (`Const.CELL`).
const OLD_TOP_KEY: &str = "Cell";

/// One rewrite: the child path `from` (one or more levels) under a class becomes `to`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Rule {
    pub(super) from: Vec<String>,
    pub(super) to: String,
}

/// The rules of a mapping file: class → first child name → rules, longest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules {
    pub(super) by_class: HashMap<String, HashMap<String, Vec<Rule>>>,
}

impl Rules {
    /// The rules of a YAML text. `Err` says why the text is not a mapping of mappings of
    /// strings (msprobe then drops the mapping).
    pub fn parse(text: &str) -> Result<Rules, LayerMappingError> {
        Rules::parse_cancellable(text, &AtomicBool::new(false))
    }

    /// [`Rules::parse`] that stops with [`LayerMappingError::Cancelled`] soon after `cancel`
    /// is set (checked every [`CANCEL_EVERY`] mapping entries read and rules made).
    pub fn parse_cancellable(text: &str, cancel: &AtomicBool) -> Result<Rules, LayerMappingError> {
        let checks = Cell::new(0);
        let seed = YamlSeed {
            text,
            cancel: CancelCheck {
                flag: cancel,
                count: &checks,
            },
        };
        let doc: Yaml = serde::de::DeserializeSeed::deserialize(
            seed,
            serde_norway::Deserializer::from_str(text),
        )
        .map_err(|e| {
            if cancel.load(Ordering::Relaxed) {
                LayerMappingError::Cancelled
            } else {
                LayerMappingError::Content(format!("not valid YAML: {e}"))
            }
        })?;
        let check = seed.cancel;
        let Yaml::Map(top) = doc else {
            return Err(LayerMappingError::Content(format!(
                "expected a mapping {{Class: {{child: golden_child}}}}, found {}",
                doc.describe()
            )));
        };
        let mut top = dedup(top);
        check.tick()?;
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
                return Err(LayerMappingError::Content(format!(
                    "the rules of {} must be a mapping {{child: golden_child}}, found {}",
                    class.describe(),
                    children.describe()
                )));
            };
            check.tick()?;
            let mut by_first: HashMap<String, Vec<Rule>> = HashMap::new();
            for (from, to) in dedup(children) {
                check.tick()?;
                let (Some(from_text), Some(to_text)) = (from.text(), to.text()) else {
                    return Err(LayerMappingError::Content(format!(
                        "{}: rule {} -> {} is not text -> text",
                        class.describe(),
                        from.describe(),
                        to.describe()
                    )));
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
    pub(super) fn for_child(&self, class: &str, child: &str) -> &[Rule] {
        self.by_class
            .get(class)
            .and_then(|m| m.get(child))
            .map_or(&[], Vec::as_slice)
    }
}

/// A YAML node, as much of it as the rules need. Mappings keep their entries in file order and
/// keep duplicate keys (PyYAML lets a later one replace an earlier one, see [`dedup`]).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Yaml {
    Null,
    Text(String),
    Map(Vec<(Yaml, Yaml)>),
    /// Any other scalar or a list: its kind and, for scalars, its text.
    Other(&'static str, String),
}

impl Yaml {
    pub(super) fn text(&self) -> Option<&str> {
        match self {
            Yaml::Text(s) => Some(s),
            _ => None,
        }
    }

    pub(super) fn describe(&self) -> String {
        match self {
            Yaml::Null => "nothing".into(),
            Yaml::Text(s) => format!("{s:?}"),
            Yaml::Map(_) => "a mapping".into(),
            Yaml::Other(kind, text) if text.is_empty() => (*kind).into(),
            Yaml::Other(kind, text) => format!("{kind} {text}"),
        }
    }

    /// Identity of a mapping key, for duplicates.
    pub(super) fn key_id(&self) -> Option<(&'static str, &str)> {
        #[cfg(test)]
        KEY_IDS_TAKEN.with(|n| n.set(n.get() + 1));
        match self {
            Yaml::Null => Some(("null", "")),
            Yaml::Text(s) => Some(("text", s)),
            Yaml::Other(kind, text) if !text.is_empty() => Some((kind, text)),
            _ => None,
        }
    }
}

#[cfg(test)]
thread_local! {
    /// How many times this thread took a key's identity: the work of de-duplication, counted
    /// (the tests bound it without timing anything).
    pub(super) static KEY_IDS_TAKEN: Cell<u64> = const { Cell::new(0) };
}

/// PyYAML's mapping semantics: a repeated key keeps its first place and takes its last value.
/// A key without an identity (a list, a mapping) is never a repeat. Linear: the place of each
/// identity is remembered, not searched for (a mapping file may have 200,000 classes).
pub(super) fn dedup(entries: Vec<(Yaml, Yaml)>) -> Vec<(Yaml, Yaml)> {
    // Identity → its place in the output; owned, as the entries move into the output.
    let mut place: HashMap<(&'static str, String), usize> = HashMap::with_capacity(entries.len());
    let mut out: Vec<(Yaml, Yaml)> = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        let id = k.key_id().map(|(kind, text)| (kind, text.to_string()));
        match id.as_ref().and_then(|id| place.get(id)) {
            Some(&i) => out[i].1 = v,
            None => {
                if let Some(id) = id {
                    place.insert(id, out.len());
                }
                out.push((k, v));
            }
        }
    }
    out
}

/// How many mapping entries or rules are read or made between two looks at the cancel flag.
pub(super) const CANCEL_EVERY: u32 = 1024;

/// The cancel flag as a long loop looks at it: every [`CANCEL_EVERY`] steps.
#[derive(Clone, Copy)]
pub(super) struct CancelCheck<'c> {
    pub(super) flag: &'c AtomicBool,
    pub(super) count: &'c Cell<u32>,
}

impl CancelCheck<'_> {
    /// One more step; [`LayerMappingError::Cancelled`] when this step looks and the flag is set.
    pub(super) fn tick(&self) -> Result<(), LayerMappingError> {
        let n = self.count.get().wrapping_add(1);
        self.count.set(n);
        if n.is_multiple_of(CANCEL_EVERY) && self.flag.load(Ordering::Relaxed) {
            return Err(LayerMappingError::Cancelled);
        }
        Ok(())
    }
}

/// PyYAML 1.1's booleans that YAML 1.2 (serde_norway) reads as text: msprobe's `yaml.safe_load`
/// turns a plain (unquoted) `yes`, `no`, `on` or `off` into `True`/`False`.
fn yaml11_bool(plain: &str) -> Option<bool> {
    match plain {
        "yes" | "Yes" | "YES" | "on" | "On" | "ON" => Some(true),
        "no" | "No" | "NO" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

/// Reads a [`Yaml`] from the text `text` that the deserializer borrows from: a borrowed scalar
/// is located in `text` to tell a plain scalar (resolved as PyYAML 1.1 does) from a quoted one.
#[derive(Clone, Copy)]
pub(super) struct YamlSeed<'t> {
    pub(super) text: &'t str,
    /// Looked at every few mapping entries: a cancel stops the reading of a big file.
    pub(super) cancel: CancelCheck<'t>,
}

impl YamlSeed<'_> {
    /// Whether `v`, a slice of the text, is a quoted scalar (a quote just before it).
    fn quoted(&self, v: &str) -> bool {
        let base = self.text.as_ptr() as usize;
        let at = v.as_ptr() as usize;
        if at < base || at > base + self.text.len() {
            // Not a slice of the text (an unescaped copy): only quoted scalars are copied.
            return true;
        }
        at > base && matches!(self.text.as_bytes().get(at - base - 1), Some(b'\'' | b'"'))
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for YamlSeed<'_> {
    type Value = Yaml;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Yaml, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for YamlSeed<'_> {
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
        d.deserialize_any(self)
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
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Yaml, E> {
        match yaml11_bool(v) {
            Some(b) if !self.quoted(v) => Ok(Yaml::Other("a boolean", b.to_string())),
            _ => Ok(Yaml::Text(v.to_string())),
        }
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
        while let Some(k) = map.next_key_seed(self)? {
            if self.cancel.tick().is_err() {
                return Err(serde::de::Error::custom("cancelled"));
            }
            let v = map.next_value_seed(self)?;
            entries.push((k, v));
        }
        Ok(Yaml::Map(entries))
    }
}

/// What `-lm` asks for: its rules, or why not. A missing, unreadable or wrongly named file
/// ([`LayerMappingError::File`]) stops the conversion; content msprobe cannot use
/// ([`LayerMappingError::Content`]) only drops the mapping.
pub fn load_rules(
    lm: &LayerMapping,
    confine: &graph_ascend_dump::Confine,
    cancel: &AtomicBool,
) -> Result<Rules, LayerMappingError> {
    let path = match lm {
        LayerMapping::None | LayerMapping::Bare => return Ok(Rules::default()),
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
    let bytes = confine
        .read(path)
        .map_err(|e| file_error(format!("cannot read the layer mapping file: {e}")))?;
    let content = |why: &dyn std::fmt::Display| {
        LayerMappingError::Content(format!("{}: {why}", path.display()))
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return Err(content(&"not UTF-8 text"));
    };
    Rules::parse_cancellable(&text, cancel).map_err(|why| match why {
        LayerMappingError::Cancelled => why,
        why => content(&why),
    })
}

/// Checks `-lm FILE` before any dump is read: an error for a missing or unreadable file, a
/// warning text (msprobe's "mapping is not effective") when its content cannot be used.
pub fn preflight(
    lm: &LayerMapping,
    confine: &graph_ascend_dump::Confine,
    cancel: &AtomicBool,
) -> Result<Option<String>, ConvertError> {
    match load_rules(lm, confine, cancel) {
        Ok(_) => Ok(None),
        Err(e) if e.drops_mapping() => Ok(Some(ignored_warning(&e))),
        Err(e) => Err(e.into()),
    }
}

pub(super) fn ignored_warning(why: &LayerMappingError) -> String {
    format!("the layer mapping could not be used, mapping is not effective: {why}")
}
