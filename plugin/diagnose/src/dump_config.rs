//! What to dump next: msprobe's `config.json` for a second run that keeps the suspects' input
//! and output tensors.
//!
//! A statistics compare cannot be replayed call by call; the tensors of its suspects can. The
//! config written here asks msprobe 26.2, at level `mix` (an L1 dump has an empty
//! `construct.json`, which `convert` refuses), for one of two dumps ([`DumpTask`]):
//! - task `tensor` with the suspects in `tensor.list`: only those calls are recorded, with
//!   their tensors (a module's with every call inside it and its parameters' gradients:
//!   msprobe's mix scope); `construct.json` still holds the whole hierarchy, so `convert`
//!   builds the graph with the suspects' data in it, and `graph-ascend precheck` replays them;
//! - task `statistics` with the suspects in `statistics.tensor_list`: the same statistics dump
//!   as before (the diagnosis runs again on it) plus the suspects' tensors.
//!
//! msprobe keeps a call's tensors when any `tensor_list` item is a *substring* of the name it
//! is recording: `Functional.linear.1.forward` for an API call's forward (`…backward` for its
//! backward), `Module.fc.Linear.forward.0` for a module's (the same with `Cell.` in
//! MindSpore). So an API is written with its pass (`Functional.linear.1.forward` cannot match
//! `Functional.linear.10.forward`), or with its index and a trailing `.` for both passes
//! (`Functional.linear.1.`). A module's name ends with its index, so `….forward.1` also
//! matches `….forward.10`–`….forward.19`; and in MindSpore `Functional.x.1.` also matches
//! `MintFunctional.x.1.`. Those extra matches are found against the file's own node names and
//! reported ([`DumpConfig::also_matched`]).
//!
//! The pure part is here ([`dump_config`]: suspects and the file's names → JSON); the command
//! line loads the names and writes the file.

use std::collections::BTreeSet;

use crate::diagnose::Diagnosis;
use crate::graph::Direction;

/// msprobe's name prefixes of API calls (`Const.DUMP_PREFIX`).
const API_PREFIXES: [&str; 11] = [
    "Distributed",
    "Functional",
    "Torch",
    "Tensor",
    "Mint",
    "MintFunctional",
    "Primitive",
    "Aten",
    "VF",
    "NPU",
    "Jit",
];

/// Which dump the config asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DumpTask {
    /// Task `tensor`, `tensor.list`: the suspects alone, with their tensors.
    #[default]
    Tensor,
    /// Task `statistics`, `statistics.tensor_list`: every call's statistics, the suspects'
    /// tensors.
    Statistics,
}

/// Where the second run writes its dump (relative to where it runs).
pub const DEFAULT_DUMP_PATH: &str = "./dump_suspects";

/// The framework the config is for (the config's fields are the same; the names differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Framework {
    PyTorch,
    MindSpore,
}

impl Framework {
    /// The framework of a run from its node names: `Cell.`, `Mint…` and `Primitive.` calls
    /// are MindSpore's, `Module.`, `Torch.`, `NPU.`, `Aten.` and `VF.` calls PyTorch's; `None`
    /// when no name tells.
    pub fn of_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<Framework> {
        for name in names {
            let prefix = name.split('.').next().unwrap_or("");
            match prefix {
                "Cell" | "Mint" | "MintFunctional" | "Primitive" | "Jit" => {
                    return Some(Framework::MindSpore)
                }
                "Module" | "Torch" | "NPU" | "Aten" | "VF" => return Some(Framework::PyTorch),
                _ => {}
            }
        }
        None
    }

    pub fn name(self) -> &'static str {
        match self {
            Framework::PyTorch => "PyTorch",
            Framework::MindSpore => "MindSpore",
        }
    }
}

/// Why a node is a suspect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SuspectKind {
    /// A source of the diagnosis (its golden partner is dumped too).
    Source,
    /// The first node of a rank whose outputs hold inf/NaN.
    NonFinite,
    /// No source: one of the first calls whose outputs differ beyond the noise.
    Differs,
}

/// One call to dump, in one step and rank.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Suspect {
    pub step: i64,
    pub rank: i64,
    /// The node's name in the compare (the target's, or the golden partner's).
    pub node: String,
    pub direction: Direction,
    pub kind: SuspectKind,
}

/// The suspects of a diagnosis: each source and its golden partner (when named differently),
/// then the first inf/NaN of each rank; empty when the diagnosis found neither.
pub fn suspects(found: &Diagnosis) -> Vec<Suspect> {
    let mut out = Vec::new();
    for s in &found.sources {
        let mut push = |node: &str| {
            out.push(Suspect {
                step: s.step,
                rank: s.rank,
                node: node.to_string(),
                direction: s.direction,
                kind: SuspectKind::Source,
            })
        };
        push(&s.node);
        if !s.golden_node.is_empty() && s.golden_node != s.node {
            push(&s.golden_node);
        }
    }
    for n in &found.first_non_finite {
        out.push(Suspect {
            step: n.step,
            rank: n.rank,
            node: n.node.clone(),
            direction: n.direction,
            kind: SuspectKind::NonFinite,
        });
    }
    out
}

/// The `tensor_list` items that keep the tensors of node `name` in `direction`, and the names
/// msprobe records for them (what the items are meant to match); `None` for a name that is
/// neither an API call nor a module call (`DefaultModel`, a parameter gradient, the
/// optimizer's update).
///
/// - API `P.api.N.forward`: a forward suspect is written whole; a backward one as `P.api.N.`,
///   both passes (the backward's replay starts from the forward's inputs).
/// - Module `Module.m.C.forward.N`: written whole; a backward suspect adds its forward call.
pub fn patterns_of(name: &str, direction: Direction) -> Option<(Vec<String>, Vec<String>)> {
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() < 3 || name.contains(".parameters_grad") || direction == Direction::Update {
        return None;
    }
    let last = parts[parts.len() - 1];
    let before = parts[parts.len() - 2];
    let is_pass = |p: &str| p == "forward" || p == "backward";
    let is_index = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    let prefix = parts[0];
    if (prefix == "Module" || prefix == "Cell") && is_pass(before) && is_index(last) {
        let stem = parts[..parts.len() - 2].join(".");
        let forward = format!("{stem}.forward.{last}");
        return Some(match direction {
            Direction::Backward => {
                let backward = format!("{stem}.backward.{last}");
                (
                    vec![forward.clone(), backward.clone()],
                    vec![forward, backward],
                )
            }
            _ => (vec![forward.clone()], vec![forward]),
        });
    }
    if API_PREFIXES.contains(&prefix) && is_index(before) && is_pass(last) {
        let call = parts[..parts.len() - 1].join(".");
        let forward = format!("{call}.forward");
        return Some(match direction {
            Direction::Backward => (
                vec![format!("{call}.")],
                vec![forward, format!("{call}.backward")],
            ),
            _ => (vec![forward.clone()], vec![forward]),
        });
    }
    None
}

/// A written config and what it will dump.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DumpConfig {
    /// msprobe's `config.json`.
    pub config: serde_json::Value,
    /// The items of `tensor.list` or `statistics.tensor_list`, sorted.
    pub tensor_list: Vec<String>,
    /// The calls meant to be dumped (msprobe's names), sorted.
    pub intended: Vec<String>,
    /// Names in the file the items match besides the intended ones (msprobe keeps their
    /// tensors too), sorted.
    pub also_matched: Vec<String>,
    /// Suspects whose name is neither an API nor a module call, left out.
    pub left_out: Vec<String>,
    pub steps: Vec<i64>,
    /// Empty: every rank (a file of one rank; a run without distribution has no rank id, and
    /// msprobe dumps nothing when a rank list is given there).
    pub ranks: Vec<i64>,
}

/// Why no config can be written.
#[derive(Debug, thiserror::Error)]
pub enum DumpConfigError {
    #[error("no suspect to dump: the diagnosis found no source, no inf/NaN and no call whose output differs beyond the noise")]
    NoSuspect,
    #[error("no suspect is an API or module call msprobe can dump by name (left out: {0})")]
    NothingNamed(String),
}

/// msprobe 26.2's `config.json` dumping `suspects`' tensors at level `mix`, as `task` says, in
/// their steps (and ranks, when `file_ranks` holds more than one). A statistics dump gets
/// `risk_level` `ALL`: without a `list`, msprobe otherwise leaves out the calls of the APIs it
/// ranks as low risk, a suspect among them (with a `list`, the list alone decides). `names` are
/// the node names of the file (both sides), against which the items' extra matches are found.
pub fn dump_config<'a>(
    task: DumpTask,
    suspects: &[Suspect],
    names: impl IntoIterator<Item = &'a str>,
    file_ranks: &[i64],
    dump_path: &str,
) -> Result<DumpConfig, DumpConfigError> {
    if suspects.is_empty() {
        return Err(DumpConfigError::NoSuspect);
    }
    let mut items = BTreeSet::new();
    let mut intended = BTreeSet::new();
    let mut left_out = BTreeSet::new();
    let mut steps = BTreeSet::new();
    let mut ranks = BTreeSet::new();
    for s in suspects {
        match patterns_of(&s.node, s.direction) {
            Some((p, i)) => {
                items.extend(p);
                intended.extend(i);
                steps.insert(s.step);
                ranks.insert(s.rank);
            }
            None => {
                left_out.insert(s.node.clone());
            }
        }
    }
    let left_out: Vec<String> = left_out.into_iter().collect();
    if items.is_empty() {
        return Err(DumpConfigError::NothingNamed(left_out.join(", ")));
    }
    let mut also = BTreeSet::new();
    for name in names {
        if !intended.contains(name) && items.iter().any(|item| name.contains(item.as_str())) {
            also.insert(name.to_string());
        }
    }
    let tensor_list: Vec<String> = items.into_iter().collect();
    let steps: Vec<i64> = steps.into_iter().collect();
    let ranks: Vec<i64> = if file_ranks.len() > 1 {
        ranks.into_iter().collect()
    } else {
        Vec::new()
    };
    let mut config = serde_json::json!({
        "task": "",
        "dump_path": dump_path,
        "rank": ranks,
        "step": steps,
        "level": "mix",
        "extra_info": true,
        "async_dump": false,
    });
    let (name, section) = match task {
        DumpTask::Tensor => (
            "tensor",
            serde_json::json!({
                "scope": [],
                "list": tensor_list,
                "data_mode": ["all"],
            }),
        ),
        DumpTask::Statistics => {
            config["risk_level"] = "ALL".into();
            (
                "statistics",
                serde_json::json!({
                    "scope": [],
                    "list": [],
                    "data_mode": ["all"],
                    "summary_mode": "statistics",
                    "tensor_list": tensor_list,
                }),
            )
        }
    };
    config["task"] = name.into();
    config[name] = section;
    Ok(DumpConfig {
        config,
        tensor_list,
        intended: intended.into_iter().collect(),
        also_matched: also.into_iter().collect(),
        left_out,
        steps,
        ranks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suspect(step: i64, rank: i64, node: &str, direction: Direction) -> Suspect {
        Suspect {
            step,
            rank,
            node: node.into(),
            direction,
            kind: SuspectKind::Source,
        }
    }

    /// msprobe's test: an item keeps a call's tensors when it is a substring of the name.
    fn kept(config: &DumpConfig, name: &str) -> bool {
        config.tensor_list.iter().any(|i| name.contains(i.as_str()))
    }

    #[test]
    fn an_api_forward_matches_only_its_own_call() {
        let s = [suspect(
            0,
            0,
            "Functional.linear.1.forward",
            Direction::Forward,
        )];
        let names = [
            "Functional.linear.1.forward",
            "Functional.linear.1.backward",
            "Functional.linear.10.forward",
            "Functional.linear.11.forward",
            "Functional.linear.0.forward",
        ];
        let c = dump_config(DumpTask::Statistics, &s, names, &[0], DEFAULT_DUMP_PATH).unwrap();
        assert_eq!(c.tensor_list, ["Functional.linear.1.forward"]);
        for n in names {
            assert_eq!(kept(&c, n), n == "Functional.linear.1.forward", "{n}");
        }
        assert!(c.also_matched.is_empty());
        assert_eq!(
            c.config["statistics"]["tensor_list"][0],
            "Functional.linear.1.forward"
        );
        assert_eq!(c.config["level"], "mix");
        assert_eq!(c.config["task"], "statistics");
        assert_eq!(c.config["step"], serde_json::json!([0]));
        // One rank in the file: no rank list (a run without distribution has no rank id).
        assert_eq!(c.config["rank"], serde_json::json!([]));
    }

    #[test]
    fn an_api_backward_takes_both_passes_ended_by_a_dot() {
        let s = [suspect(
            1,
            3,
            "Tensor.__add__.2.backward",
            Direction::Backward,
        )];
        let names = [
            "Tensor.__add__.2.forward",
            "Tensor.__add__.2.backward",
            "Tensor.__add__.21.backward",
            "Tensor.__iadd__.2.forward",
        ];
        let c = dump_config(DumpTask::Tensor, &s, names, &[0, 3], "./d").unwrap();
        assert_eq!(c.tensor_list, ["Tensor.__add__.2."]);
        assert_eq!(
            c.intended,
            ["Tensor.__add__.2.backward", "Tensor.__add__.2.forward"]
        );
        for n in names {
            assert_eq!(kept(&c, n), n.starts_with("Tensor.__add__.2."), "{n}");
        }
        assert_eq!(c.config["task"], "tensor");
        assert_eq!(
            c.config["tensor"]["list"],
            serde_json::json!(["Tensor.__add__.2."])
        );
        assert!(c.config.get("risk_level").is_none());
        assert_eq!(c.config["rank"], serde_json::json!([3]));
        assert_eq!(c.config["step"], serde_json::json!([1]));
        assert_eq!(c.config["dump_path"], "./d");
    }

    #[test]
    fn a_module_index_prefix_of_others_is_reported() {
        let s = [suspect(
            0,
            0,
            "Module.fc.Linear.backward.1",
            Direction::Backward,
        )];
        let names = [
            "Module.fc.Linear.forward.1",
            "Module.fc.Linear.backward.1",
            "Module.fc.Linear.forward.12",
            "Module.fc.Linear.forward.2",
        ];
        let c = dump_config(DumpTask::Statistics, &s, names, &[0], DEFAULT_DUMP_PATH).unwrap();
        assert_eq!(
            c.tensor_list,
            ["Module.fc.Linear.backward.1", "Module.fc.Linear.forward.1"]
        );
        assert_eq!(c.also_matched, ["Module.fc.Linear.forward.12"]);
    }

    #[test]
    fn mindspore_functional_inside_mint_functional_is_reported() {
        let s = [suspect(
            0,
            0,
            "Functional.relu.0.forward",
            Direction::Forward,
        )];
        let names = ["Functional.relu.0.forward", "MintFunctional.relu.0.forward"];
        let c = dump_config(DumpTask::Statistics, &s, names, &[0], DEFAULT_DUMP_PATH).unwrap();
        assert_eq!(c.also_matched, ["MintFunctional.relu.0.forward"]);
        assert_eq!(
            Framework::of_names(["DefaultModel", "Cell.dense.Dense.forward.0"]),
            Some(Framework::MindSpore)
        );
        assert_eq!(
            Framework::of_names(["Module.fc.Linear.forward.0"]),
            Some(Framework::PyTorch)
        );
        assert_eq!(Framework::of_names(["Functional.relu.0.forward"]), None);
    }

    #[test]
    fn names_that_are_not_calls_are_left_out_or_refused() {
        assert!(patterns_of("DefaultModel", Direction::Forward).is_none());
        assert!(patterns_of("Module.fc.Linear.parameters_grad", Direction::Backward).is_none());
        assert!(patterns_of("Functional.linear.x.forward", Direction::Forward).is_none());
        let s = [suspect(0, 0, "DefaultModel", Direction::Forward)];
        assert!(matches!(
            dump_config(DumpTask::Tensor, &s, [], &[0], DEFAULT_DUMP_PATH),
            Err(DumpConfigError::NothingNamed(_))
        ));
        assert!(matches!(
            dump_config(DumpTask::Tensor, &[], [], &[0], DEFAULT_DUMP_PATH),
            Err(DumpConfigError::NoSuspect)
        ));
        let both = [
            suspect(2, 0, "DefaultModel", Direction::Forward),
            suspect(0, 1, "Cell.dense.Dense.forward.0", Direction::Forward),
        ];
        let c = dump_config(DumpTask::Tensor, &both, [], &[0, 1], DEFAULT_DUMP_PATH).unwrap();
        assert_eq!(c.left_out, ["DefaultModel"]);
        assert_eq!(c.tensor_list, ["Cell.dense.Dense.forward.0"]);
        assert_eq!(c.steps, [0]);
        assert_eq!(c.ranks, [1]);
    }
}
