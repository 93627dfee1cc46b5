//! Tests of the layer mapping: rules, scopes, the trie, whole mappings.

use serde_json::Value;

use super::mapping::api_mapping;
use std::cell::Cell;
use std::sync::atomic::AtomicBool;

use super::error::LayerMappingError;
use super::rules::{dedup, Rule, Rules, Yaml, KEY_IDS_TAKEN, TOP_LAYER};
use super::side::*;

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
        let err = Rules::parse(text).expect_err(text).to_string();
        assert!(err.contains(needle), "{text:?}: {err:?} lacks {needle:?}");
    }
    // Non-text class names are allowed (they never match) when their rules are sound.
    assert_eq!(rules("1:\n  a: b\n"), Rules::default());
}

/// PyYAML 1.1 (msprobe's `yaml.safe_load`) reads plain yes/no/on/off as booleans, so a rule
/// `attn: yes` is not text -> text and the mapping is dropped; quoted, they stay text
/// (found by the differential generator's YAML cases).
#[test]
fn yaml_1_1_booleans_as_pyyaml_reads_them() {
    for text in [
        "Block:\n  attn: yes\n",
        "Block:\n  no: attn\n",
        "Block:\n  a: Off\n",
        "Block: {a: ON}\n",
    ] {
        let err = Rules::parse(text).expect_err(text).to_string();
        assert!(err.contains("a boolean"), "{text:?}: {err:?}");
    }
    assert_eq!(
        rules("Block:\n  attn: 'yes'\n").for_child("Block", "attn"),
        [rule("attn", "yes")]
    );
    assert_eq!(
        rules("Block:\n  \"no\": attn\n").for_child("Block", "no"),
        [rule("no", "attn")]
    );
    // Only PyYAML's spellings: `y`, `n` and `yEs` stay text.
    assert_eq!(
        rules("Block:\n  y: n\n").for_child("Block", "y"),
        [rule("y", "n")]
    );
    assert_eq!(
        rules("Block:\n  a: yEs\n").for_child("Block", "a"),
        [rule("a", "yEs")]
    );
    // A boolean class name never matches, like any non-text class.
    assert_eq!(rules("on:\n  a: b\n"), Rules::default());
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
    let m = api_mapping(
        &npu,
        &bench,
        &rules("Block:\n  new_attn: attn\n"),
        &AtomicBool::new(false),
    )
    .unwrap();
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
    let m = api_mapping(&npu, &bench, &Rules::default(), &AtomicBool::new(false)).unwrap();
    assert_eq!(m["Torch.matmul.0.forward"], None);
}

/// The de-duplication as it was first written (quadratic: each key searched for among those
/// kept), the reference the linear one must agree with.
fn dedup_by_search(entries: Vec<(Yaml, Yaml)>) -> Vec<(Yaml, Yaml)> {
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

/// A small deterministic generator (xorshift), so that a failure repeats.
struct Xorshift(u64);

impl Xorshift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The linear de-duplication gives what the searching one gave, order and values, on random
/// mappings full of repeats: text, null, number, boolean keys (a number and a text of the same
/// digits are different keys), and keys without identity (lists, mappings) that never merge.
#[test]
fn dedup_agrees_with_the_searching_reference() {
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    for round in 0..300 {
        let len = rng.below(60);
        let entries: Vec<(Yaml, Yaml)> = (0..len)
            .map(|i| {
                let n = rng.below(8).to_string();
                let key = match rng.below(6) {
                    0 | 1 => Yaml::Text(n),
                    2 => Yaml::Other("a number", n),
                    3 => Yaml::Null,
                    4 => Yaml::Other("a boolean", (rng.below(2) == 0).to_string()),
                    _ if rng.below(2) == 0 => Yaml::Other("a list", String::new()),
                    _ => Yaml::Map(Vec::new()),
                };
                (key, Yaml::Text(format!("{round}.{i}")))
            })
            .collect();
        assert_eq!(
            dedup(entries.clone()),
            dedup_by_search(entries.clone()),
            "{entries:?}"
        );
    }
}

/// A mapping file of `classes` classes of two rules each, some classes and rules repeated.
fn big_mapping(classes: usize) -> String {
    let mut text = String::with_capacity(classes * 48);
    for c in 0..classes {
        // Every tenth class repeats an earlier one: its rules replace the earlier ones.
        let class = if c % 10 == 9 { c - 5 } else { c };
        text.push_str(&format!(
            "Class{class}:\n  attn: self_attn\n  mlp.fc{c}: dense\n  attn: attention\n"
        ));
    }
    text
}

/// Key identities taken while parsing a mapping of `classes` classes.
fn key_ids_taken_parsing(classes: usize) -> (u64, Rules) {
    let text = big_mapping(classes);
    KEY_IDS_TAKEN.with(|n| n.set(0));
    let rules = Rules::parse(&text).unwrap_or_else(|e| panic!("{e}"));
    (KEY_IDS_TAKEN.with(Cell::get), rules)
}

/// Regression: de-duplicating the classes of a mapping file searched every kept key for each
/// new one (10k classes 0.7 s, 40k 9.3 s, 200k over a minute). The work, counted in key
/// identities taken (no timing), now grows with the file: 40k classes cost four times 10k, and
/// a few identities per key.
#[test]
fn a_big_mapping_is_deduplicated_in_linear_work() {
    let (small, _) = key_ids_taken_parsing(10_000);
    let (big, rules) = key_ids_taken_parsing(40_000);
    // 40,000 class keys and 3 rule keys under each: 160,000 keys in all.
    let keys = 160_000;
    assert!(big <= 2 * keys, "{big} key identities for {keys} keys");
    assert!(big <= 4 * small + 16, "10k: {small}, 40k: {big}");
    // The repeated classes kept their later rules, longest first.
    assert_eq!(rules.by_class.len(), 36_000);
    let repeated = rules.for_child("Class14", "mlp");
    assert_eq!(repeated.len(), 1);
    assert_eq!(
        repeated[0].from,
        vec!["mlp".to_string(), "fc19".to_string()]
    );
    assert_eq!(rules.for_child("Class14", "attn")[0].to, "attention");
}

/// A cancel stops the reading of a big mapping file (the flag is looked at every
/// [`CANCEL_EVERY`] entries, not only at the end).
#[test]
fn a_cancel_stops_reading_a_big_mapping() {
    let text = big_mapping(40_000);
    let cancel = AtomicBool::new(true);
    KEY_IDS_TAKEN.with(|n| n.set(0));
    let got = Rules::parse_cancellable(&text, &cancel);
    assert!(matches!(got, Err(LayerMappingError::Cancelled)), "{got:?}");
    assert_eq!(
        KEY_IDS_TAKEN.with(Cell::get),
        0,
        "stopped while reading, before any de-duplication"
    );
}
