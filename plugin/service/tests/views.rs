//! View state belongs to a client: two clients expanding different nodes never see each other's.

mod common;

use common::{logdir_with, meta, Probe};
use serde_json::Value;

fn expanded(v: &Value) -> Vec<String> {
    let mut names: Vec<String> = v["data"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, n)| n["expand"] == true && n["isRoot"] == false)
        .map(|(k, _)| k.clone())
        .collect();
    names.sort();
    names
}

#[test]
fn two_clients_keep_separate_expansions() {
    let (_dir, state) = logdir_with("compare_tf_stats");
    let m = meta("run", "compare_20261122090320");
    let alice = Probe {
        state: state.clone(),
        client: "alice".into(),
    };
    let bob = Probe {
        state,
        client: "bob".into(),
    };
    alice.expand(&m, "root", "NPU");
    bob.expand(&m, "root", "NPU");
    let a = alice.expand(&m, "Module.embed.Embedding.forward.0", "NPU");
    let b = bob.expand(&m, "Module.head.Linear.forward.0", "NPU");
    assert_eq!(expanded(&a), ["Module.embed.Embedding.forward.0"]);
    assert_eq!(expanded(&b), ["Module.head.Linear.forward.0"]);
    // Collapsing in one client leaves the other's as it was.
    let a = alice.expand(&m, "Module.embed.Embedding.forward.0", "NPU");
    assert!(expanded(&a).is_empty());
    let b = bob.expand(&m, "Module.head.Linear.forward.0", "NPU");
    assert!(expanded(&b).is_empty());
    let b = bob.expand(&m, "Module.head.Linear.forward.0", "NPU");
    assert_eq!(expanded(&b), ["Module.head.Linear.forward.0"]);
}

#[test]
fn selecting_a_deep_node_expands_its_ancestors() {
    let (_dir, state) = logdir_with("compare_tf_stats");
    let m = meta("run", "compare_20261122090320");
    let p = Probe::new(state);
    p.expand(&m, "root", "NPU");
    let lists = p.node_lists(&m);
    let deep = lists["data"]["npuNodeList"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|n| n.starts_with("Functional.linear"))
        .unwrap()
        .to_owned();
    let v = p.expand(&m, &deep, "NPU");
    let data = v["data"].as_object().unwrap();
    assert!(
        data.contains_key(&deep),
        "{deep} visible after selecting it"
    );
    // Its parent chain is expanded up to the root.
    let mut parent = data[&deep]["parentNode"].as_str().unwrap().to_owned();
    while !parent.is_empty() {
        assert_eq!(data[&parent]["expand"], true, "{parent} expanded");
        parent = data[&parent]["parentNode"].as_str().unwrap().to_owned();
    }
}
