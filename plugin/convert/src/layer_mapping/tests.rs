//! Tests of the layer mapping: rules, scopes, the trie, whole mappings.

use serde_json::Value;

use super::mapping::api_mapping;
use super::rules::{Rule, Rules, TOP_LAYER};
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
