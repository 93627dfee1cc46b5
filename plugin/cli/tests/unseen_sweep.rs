//! What the statistics can still tell, on the committed second sweep
//! (`tests/diagnosis/unseen.json.xz`, made once by `generate/gen_unseen.py` with real torch and
//! msprobe): a bfloat16 target with one fault against a float32 golden, at 1.5–30 times the noise
//! of the faulty tensor's op kind, in two architectures:
//! - the tiny transformer of the generated set, layer 0 and layer 3 of 4: computation the dump
//!   did not see inside `layers.L.mlp` (a module forward hook, a module backward hook, a custom
//!   autograd `Function` on its output (forward) or on its input (backward)) — expected at the
//!   module node; kernel faults in op kinds called only four times a step (attention's softmax,
//!   the MLP's GELU) — expected at the API node;
//! - a tiny LLaMA (RMSNorm with an fp32 rsqrt, SwiGLU, rotary, causal softmax), faults in layer 0
//!   at step 0, in layer 3 at step 1 and in layer 1 on rank 1 of two: softmax, SiLU and rsqrt
//!   kernel faults, and a module backward hook on the SwiGLU;
//! - noise-only pairs of other seeds, and a reference of another seed per architecture.
//!
//! Each pair is converted and diagnosed as a user would, with `--reference` and by default
//! (tightened from the compare itself). *Found* = a source listed at the expected node, in its
//! step and rank. A kernel fault's size is measured here, independently of the engine: the
//! faulty node's output error over the reference's noise of the tensor's op kind (the sweep's
//! `noise`). `GRAPH_ASCEND_BINARY` runs another build of `graph-ascend` (a before/after of the
//! curve).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde_json::Value;

mod common;
use common::{
    convert_pair, diagnose_json as diagnose, generated_set, output_err, sources, stored_dump,
    write_run,
};

/// The goal (docs/diagnosis.md §14): from this size (times the noise of the tensor's op kind),
/// every fault is found, with the reference and tightened from the compare alike.
const GOAL: f64 = 3.0;

/// What the rules reach today, per family (measured on this sweep, docs/diagnosis.md §14): the
/// size from which every fault of `group` is found, with the reference or tightened. Below the
/// goal's 3x where the statistics do not yet tell the fault from noise.
fn reach(arch: &str, group: &str, reference: bool) -> f64 {
    let unseen = group.starts_with("module") || group.starts_with("function");
    match (arch, group, reference) {
        ("llama", "module_backward", _) => 3.0,
        (_, _, true) if unseen => 3.0,
        (_, _, false) if unseen => 6.0,
        ("llama", "silu_forward", true) => 3.0,
        (_, "softmax_forward", true) => 6.0,
        ("transformer", "softmax_forward", false) => 6.0,
        _ => 30.0,
    }
}

/// The faults missed and the noise-only pairs with sources.
struct Outcome {
    /// (whether the fault is at or above its [`reach`], what was missed)
    missed: Vec<(bool, String)>,
    /// (architecture, with the reference, the pair and its sources)
    noisy: Vec<(String, bool, String)>,
    checked: usize,
}

/// Whether the diagnosis lists a source at `node` in `step` and `rank`.
fn finds(found: &Value, node: &str, step: &Value, rank: &Value) -> bool {
    found["sources"].as_array().is_some_and(|s| {
        s.iter()
            .any(|s| s["node"] == node && &s["step"] == step && &s["rank"] == rank)
    })
}

fn run_sweep() -> Outcome {
    let set = generated_set("unseen.json.xz");
    let runs = set["runs"].as_object().expect("runs");
    let references = set["references"].as_object().expect("references");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut paths: HashMap<&str, PathBuf> = HashMap::new();
    for (run, files) in runs {
        paths.insert(
            run.as_str(),
            write_run(dir.path(), run, files.as_object().expect("files")),
        );
    }
    let out = dir.path().join("out");
    let mut reference_dbs: HashMap<&str, String> = HashMap::new();
    for (arch, r) in references {
        let db = convert_pair(
            &paths[r["target"].as_str().expect("target")],
            &paths[r["golden"].as_str().expect("golden")],
            &out.join(format!("reference_{arch}")),
        );
        reference_dbs.insert(arch.as_str(), db.to_str().expect("UTF-8 path").to_owned());
    }
    // architecture/group → nominal k (tenths) → (faults, found with the reference, tightened)
    let mut curve: BTreeMap<String, BTreeMap<u32, [usize; 3]>> = BTreeMap::new();
    let (mut missed, mut noisy, mut checked) = (Vec::new(), Vec::new(), 0);
    let mut reasons = Vec::new();
    for case in set["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("name");
        let group = case["group"].as_str().expect("group");
        let arch = case["arch"].as_str().expect("arch");
        let (target, golden) = (
            case["target"].as_str().expect("target"),
            case["golden"].as_str().expect("golden"),
        );
        let db = convert_pair(&paths[target], &paths[golden], &out.join(name));
        let with_ref = diagnose(&db, &["--reference", &reference_dbs[arch]]);
        let tightened = diagnose(&db, &[]);
        if group == "noise" {
            for (how, found) in [("reference", &with_ref), ("tightened", &tightened)] {
                if !sources(found).is_empty() {
                    noisy.push((
                        arch.to_owned(),
                        how == "reference",
                        format!("{name} ({how}): {:?}", sources(found)),
                    ));
                }
            }
            continue;
        }
        let expect = &case["expect"];
        let node = expect["nodes"][0].as_str().expect("expected node");
        let (step, rank) = (&expect["step"], &expect["rank"]);
        let at = (
            step.as_u64().expect("step"),
            usize::try_from(rank.as_u64().expect("rank")).expect("a small rank"),
        );
        let (t, g) = (
            stored_dump(&runs[target], at.0, at.1),
            stored_dump(&runs[golden], at.0, at.1),
        );
        let op = case["fault"]["noise_of"].as_str().expect("noise_of");
        let noise = references[arch]["noise"][op]
            .as_f64()
            .expect("noise of the op");
        let ratio = output_err(&t, &g, node) / noise;
        let nominal = case["fault"]["ratio"].as_f64().expect("nominal ratio");
        let row = curve
            .entry(format!("{arch}/{group}"))
            .or_default()
            .entry((nominal * 10.0).round() as u32)
            .or_default();
        let (by_ref, by_tightening) = (
            finds(&with_ref, node, step, rank),
            finds(&tightened, node, step, rank),
        );
        row[0] += 1;
        row[1] += usize::from(by_ref);
        row[2] += usize::from(by_tightening);
        if let Some(s) = with_ref["sources"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["node"] == node))
        {
            if reasons.len() < 4 && group.starts_with("module") {
                reasons.push(format!("{node}: {}", s["reason"]));
            }
        }
        // The computation the dump did not see scales a tensor by exactly 1 + k x noise: its
        // size is k. A kernel's is measured (bf16 rounds the factor).
        let unseen = group.starts_with("module") || group.starts_with("function");
        let size = if unseen { nominal } else { ratio };
        if size < GOAL {
            continue;
        }
        for (how, found, hit, reference) in [
            ("reference", &with_ref, by_ref, true),
            ("tightened", &tightened, by_tightening, false),
        ] {
            checked += 1;
            if !hit {
                missed.push((
                    size >= reach(arch, group, reference),
                    format!(
                        "{name} ({how}): {size:.2} x the noise, not found at {node} step {step} \
                         rank {rank} (sources {:?})",
                        sources(found)
                    ),
                ));
            }
        }
    }
    println!("found by nominal k: faults, with the reference / tightened");
    for (group, rows) in &curve {
        let line: Vec<String> = rows
            .iter()
            .map(|(k, [n, r, t])| format!("{}x {r}/{t} of {n}", f64::from(*k) / 10.0))
            .collect();
        println!("  {group:<30} {}", line.join(", "));
    }
    for r in &reasons {
        println!("  {r}");
    }
    for (_, m) in &missed {
        println!("  missed: {m}");
    }
    for (_, _, n) in &noisy {
        println!("  noise-only with sources: {n}");
    }
    Outcome {
        missed,
        noisy,
        checked,
    }
}

/// Every fault at or above its family's [`reach`] is found, with the reference and tightened;
/// no noise-only pair gets a source tightened, nor with the reference in the transformer.
#[test]
fn unseen_computation_and_few_call_kernels_are_found_within_their_reach() {
    let out = run_sweep();
    assert!(
        out.checked >= 80,
        "only {} checks of faults at 3x or more",
        out.checked
    );
    let noisy: Vec<&String> = out
        .noisy
        .iter()
        .filter(|(arch, reference, _)| !reference || arch == "transformer")
        .map(|(_, _, n)| n)
        .collect();
    assert!(
        noisy.is_empty(),
        "noise-only pairs with sources: {noisy:#?}"
    );
    let missed: Vec<&String> = out
        .missed
        .iter()
        .filter(|(within, _)| *within)
        .map(|(_, m)| m)
        .collect();
    assert!(
        missed.is_empty(),
        "faults within their reach not found: {missed:#?}"
    );
}

/// The goal, not reached yet (docs/diagnosis.md §14, "What stays below"): every fault of 3x its
/// op kind's noise found in both modes, and no noise-only pair with a source with the reference
/// in the LLaMA either (two of its four get one: an fp32 `Tensor.__mul__` of an RMSNorm learned
/// from four reference calls, a SiLU backward at 2.9x its reference p95 of eight samples).
#[test]
#[ignore = "the goal of docs/diagnosis.md §14: not reached by the statistics rules yet"]
fn every_fault_from_three_times_the_noise_is_found_and_no_noise_gets_a_source() {
    let out = run_sweep();
    let noisy: Vec<&String> = out.noisy.iter().map(|(_, _, n)| n).collect();
    assert!(
        noisy.is_empty(),
        "noise-only pairs with sources: {noisy:#?}"
    );
    let missed: Vec<&String> = out.missed.iter().map(|(_, m)| m).collect();
    assert!(
        missed.is_empty(),
        "faults at 3x or more not found: {missed:#?}"
    );
}
