//! Our handlers against msprobe 26.2's own plugin, on every real `.vis.db` of the fixtures.
//!
//! `tests/fixtures/golden_api26/<case>.json` holds what msprobe's plugin answered for the file of
//! `tests/fixtures/upstream_vis/<case>/` (taken with its `probe.py`); this test asks our handlers
//! the same questions, in the same order, without sockets, and compares the same parts of the
//! answers: config, node lists, root layout, one module expansion, node info of five API nodes,
//! precision and overflow filters, matched relations.

mod common;

use serde_json::{json, Map, Value};

use common::{fixtures, golden_cases, logdir_with, meta, Probe};

#[test]
fn every_fixture_matches_msprobes_answers() {
    let cases = golden_cases();
    assert!(
        cases.len() >= 25,
        "expected the golden cases in {}",
        fixtures().display()
    );
    let mut failures = Vec::new();
    for (case, golden) in &cases {
        let (_dir, state) = logdir_with(case);
        let got = probe(&Probe::new(state));
        let want = &golden["answers"];
        let want_obj = want.as_object().expect("golden answers are an object");
        let mut problems = Vec::new();
        for (section, want_section) in want_obj {
            diff(
                got.get(section).unwrap_or(&Value::Null),
                want_section,
                section,
                &mut problems,
            );
        }
        if !problems.is_empty() {
            failures.push(format!(
                "{case}: {} differences, e.g.\n    {}",
                problems.len(),
                problems[..problems.len().min(5)].join("\n    ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from msprobe:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// The questions of msprobe's `probe.py`, asked of our handlers.
fn probe(p: &Probe) -> Value {
    let mut out = Map::new();
    let meta_dir = p.load_meta_dir();
    let runs = meta_dir["data"].as_object().cloned().unwrap_or_default();
    let mut run_names: Vec<&String> = runs.keys().collect();
    run_names.sort();
    let run = run_names[0].clone();
    let tags = runs[&run]["tags"].clone();
    let tag = tags[0].as_str().unwrap_or_default().to_owned();
    out.insert("meta_dir".into(), json!({"runs": runs.len(), "tags": tags}));
    let m = meta(&run, &tag);

    let cfg = p.config(&m);
    let c = &cfg["data"];
    let mut config = Map::new();
    for k in [
        "microSteps",
        "overflowCheck",
        "isSingleGraph",
        "task",
        "ranks",
        "steps",
    ] {
        config.insert(k.into(), c[k].clone());
    }
    let mut colors: Vec<String> = c["colors"]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    colors.sort();
    config.insert("colors".into(), json!(colors));
    out.insert("config".into(), Value::Object(config));
    let single = c["isSingleGraph"].as_bool().unwrap_or(false);
    let side = if single { "Single" } else { "NPU" };

    let lists = p.node_lists(&m);
    let mut node_lists = Map::new();
    for (k, v) in lists["data"].as_object().cloned().unwrap_or_default() {
        let mut names: Vec<String> = serde_json::from_value(v).unwrap_or_default();
        names.sort();
        node_lists.insert(k, json!(names));
    }
    out.insert("node_lists".into(), Value::Object(node_lists.clone()));

    let root = p.expand(&m, "root", side);
    let layout = root["data"].as_object().cloned().unwrap_or_default();
    let pick = |v: &Value, fields: &[&str]| -> Value {
        Value::Object(
            fields
                .iter()
                .map(|f| ((*f).to_owned(), v[*f].clone()))
                .collect(),
        )
    };
    out.insert(
        "expand_root".into(),
        Value::Object(
            layout
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        pick(
                            v,
                            &[
                                "x",
                                "y",
                                "width",
                                "height",
                                "expand",
                                "label",
                                "precisionIndex",
                                "overflowLevel",
                            ],
                        ),
                    )
                })
                .collect(),
        ),
    );
    let mut modules: Vec<&String> = layout
        .iter()
        .filter(|(_, v)| v["nodeType"] == json!(0) && v["expand"] == json!(false))
        .map(|(k, _)| k)
        .collect();
    modules.sort();
    if let Some(target) = modules.first() {
        let exp = p.expand(&m, target, side);
        let exp_layout: Map<String, Value> = exp["data"]
            .as_object()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|(k, v)| (k.clone(), pick(v, &["x", "y", "width", "height", "expand"])))
            .collect();
        out.insert(
            "expand_module".into(),
            json!({"node": target, "layout": exp_layout}),
        );
    }

    let names: Vec<String> =
        serde_json::from_value(node_lists.get("npuNodeList").cloned().unwrap_or(json!([])))
            .unwrap_or_default();
    let api_prefixes = [
        "Torch",
        "Tensor",
        "Functional",
        "Distributed",
        "Mint",
        "NPU",
        "Aten",
        "VF",
        "Primitive",
        "MintFunctional",
        "Jit",
    ];
    let apis: Vec<&String> = names
        .iter()
        .filter(|n| api_prefixes.contains(&n.split('.').next().unwrap_or("")))
        .collect();
    let leaves: Vec<&String> = if apis.len() >= 5 {
        (0..5).map(|i| apis[i * apis.len() / 5]).collect()
    } else {
        apis.clone()
    };
    let mut node_info = Map::new();
    for name in leaves {
        let info = p.node_info(&m, name, side);
        let data = info["data"].as_object().cloned().unwrap_or_default();
        let sides: Map<String, Value> = data
            .iter()
            .map(|(s, v)| {
                (
                    s.clone(),
                    json!({
                        "input_data": v.get("input_data").cloned().unwrap_or(Value::Null),
                        "output_data": v.get("output_data").cloned().unwrap_or(Value::Null),
                        "subnodes": v.get("subnodes").cloned().unwrap_or(Value::Null),
                        "upnode": v.get("upnode").cloned().unwrap_or(Value::Null),
                    }),
                )
            })
            .collect();
        node_info.insert(name.clone(), Value::Object(sides));
    }
    out.insert("node_info".into(), Value::Object(node_info));

    if !single {
        for value in [json!("pass"), json!("warning"), json!("error"), json!(-1)] {
            let f = p.filter(&m, "precision", vec![value.clone()]);
            let label = match &value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let mut hits: Vec<String> = f["data"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(sorted_json)
                .collect();
            hits.sort();
            out.insert(format!("filter_precision_{label}"), json!(hits));
        }
        let mr = p.matched(&m);
        let matched: Map<String, Value> = mr["data"]
            .as_object()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::Array(mut items) => {
                        items.sort_by_key(|a| a.to_string());
                        Value::Array(items)
                    }
                    other => other,
                };
                (k, v)
            })
            .collect();
        out.insert("matched".into(), Value::Object(matched));
    }
    if c["overflowCheck"].as_bool() == Some(true) {
        let f = p.filter(
            &m,
            "overflow",
            vec![json!("medium"), json!("high"), json!("critical")],
        );
        let mut hits: Vec<String> = f["data"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(sorted_json)
            .collect();
        hits.sort();
        out.insert("filter_overflow".into(), json!(hits));
    }
    Value::Object(out)
}

/// Python's `json.dumps(x, sort_keys=True)` of a flat object of strings.
fn sorted_json(v: &Value) -> String {
    let Some(obj) = v.as_object() else {
        return v.to_string();
    };
    let mut keys: Vec<&String> = obj.keys().collect();
    keys.sort();
    let parts: Vec<String> = keys
        .iter()
        .map(|k| format!("{}: {}", json!(k), obj[*k]))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// `probe.py`'s comparison: keys must agree; numbers agree to 1e-6 relative.
fn diff(got: &Value, want: &Value, path: &str, out: &mut Vec<String>) {
    match (got, want) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                match (a.get(k), b.get(k)) {
                    (None, Some(_)) => out.push(format!("{path}/{k}: missing")),
                    (Some(_), None) => out.push(format!("{path}/{k}: unexpected")),
                    (Some(x), Some(y)) => diff(x, y, &format!("{path}/{k}"), out),
                    (None, None) => {}
                }
            }
        }
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (
                a.as_f64().unwrap_or(f64::NAN),
                b.as_f64().unwrap_or(f64::NAN),
            );
            if (a - b).abs() > 1e-6 * a.abs().max(b.abs()).max(1.0) {
                out.push(format!("{path}: got {a}, want {b}"));
            }
        }
        (a, b) if a == b => {}
        (a, b) => {
            let short = |v: &Value| v.to_string().chars().take(120).collect::<String>();
            out.push(format!("{path}: got {}, want {}", short(a), short(b)));
        }
    }
}
