//! The rules on real msprobe outputs: the injected faults are found, fault-free pairs give
//! nothing, msprobe's own false errors never count.
//!
//! The faults (shared/fixtures/generate/models.py `perturb`): the target run adds noise to
//! `layers[2].mlp.fc1.weight` and sets `layers[1].ln2.eps` to 0.1 (the two-rank run: layer 1's
//! fc1 and layer 0's ln2, on both ranks).

mod common;

use common::{diagnose_case, listing, source_covers};
use graph_ascend_diagnose::diagnose::Direction;
use graph_ascend_diagnose::judge::Cause;
use graph_ascend_diagnose::{reason, Mode, ReasonPart, SourceKind};

/// The first two forward sources are layer 1's ln2 (its eps) and layer 2's fc1 (its weight).
fn assert_the_two_injected_faults(case: &str, ln2: &str, fc1: &str) {
    let d = diagnose_case(case);
    assert!(d.sources.len() >= 2, "{case}:\n{}", listing(&d));
    assert!(source_covers(&d, 0, ln2), "{case}:\n{}", listing(&d));
    assert!(source_covers(&d, 1, fc1), "{case}:\n{}", listing(&d));
    assert!(d.sources[..2]
        .iter()
        .all(|s| s.direction == Direction::Forward && s.step == 0));
}

#[test]
fn statistics_pair_finds_ln2_eps_and_fc1_weight() {
    assert_the_two_injected_faults(
        "compare_tf_stats",
        "Module.layers.1.ln2.LayerNorm.forward.0",
        "Module.layers.2.mlp.fc1.Linear.forward.0",
    );
    let d = diagnose_case("compare_tf_stats");
    assert_eq!(d.mode, Mode::Statistics);
    // The API inside the module leads, and the cause is named.
    let eps = &d.sources[0];
    assert_eq!(eps.node, "Functional.layer_norm.3.forward");
    assert_eq!(eps.kind, SourceKind::Cause);
    assert!(
        matches!(&eps.causes[..], [Cause::Argument { name, .. }] if name == "eps"),
        "{eps:?}"
    );
    assert!(eps.reason.contains("inputs are equal"), "{}", eps.reason);
    // The reason as data: the argument with both values, then the inputs, then the output; its
    // English sentence is those parts' words.
    assert!(
        matches!(&eps.reason_parts[..], [
            ReasonPart::ArgumentDiffers { name, target, golden },
            ReasonPart::InputsEqual,
            ReasonPart::OutputDiffers { .. },
        ] if &**name == "eps" && target != golden),
        "{:?}",
        eps.reason_parts
    );
    assert_eq!(eps.reason, reason::sentence(&eps.reason_parts));
    let fc1 = &d.sources[1];
    assert_eq!(fc1.node, "Functional.linear.10.forward");
    assert!(
        matches!(&fc1.causes[..], [Cause::Parameter { name, .. }] if name == "weight"),
        "{fc1:?}"
    );
    // Exactly the two faults: nothing downstream of them is a source of its own.
    assert_eq!(d.sources.len(), 2, "{}", listing(&d));
}

#[test]
fn md5_pair_finds_the_same_places() {
    let d = diagnose_case("compare_tf_md5");
    assert_eq!(d.mode, Mode::Md5);
    assert_the_two_injected_faults(
        "compare_tf_md5",
        "Module.layers.1.ln2.LayerNorm.forward.0",
        "Module.layers.2.mlp.fc1.Linear.forward.0",
    );
    // md5 has no magnitude.
    assert_eq!(d.sources[0].score, None);
}

#[test]
fn tensor_pair_finds_the_same_places() {
    let d = diagnose_case("compare_tf_small_tensor");
    assert_eq!(d.mode, Mode::Tensor);
    assert_the_two_injected_faults(
        "compare_tf_small_tensor",
        "Module.layers.1.ln2.LayerNorm.forward.0",
        "Module.layers.2.mlp.fc1.Linear.forward.0",
    );
}

#[test]
fn overflow_flags_the_first_non_finite_node() {
    let d = diagnose_case("compare_mlp_overflow_oc");
    let first = d.first_non_finite.first().expect("a non-finite node");
    // `exp(h * 1000)`: the multiplication is finite, the exponential overflows.
    assert_eq!(first.node, "Torch.exp.0.forward", "{}", listing(&d));
    assert_eq!(first.direction, Direction::Forward);
    assert_eq!(d.origin_rank, Some(0));
    assert!(
        matches!(&first.reason_parts[..], [
            ReasonPart::InputsFinite,
            ReasonPart::HoldsNonFinite { entry: Some(e) },
        ] if e.starts_with("output")),
        "{:?}",
        first.reason_parts
    );
    assert_eq!(first.reason, reason::sentence(&first.reason_parts));
}

#[test]
fn fault_free_cross_framework_pairs_give_no_source() {
    // MindSpore against PyTorch from the same weights: float noise everywhere, and msprobe marks
    // 157 nodes as errors because it compares `Float32` with `torch.float32` as text.
    for case in ["compare_ms_vs_pt_lm_bare", "compare_ms_vs_pt_md5_lm_bare"] {
        let d = diagnose_case(case);
        assert!(d.sources.is_empty(), "{case}:\n{}", listing(&d));
        assert!(d.first_non_finite.is_empty(), "{case}:\n{}", listing(&d));
        assert!(d.nodes_judged > 100, "{case}: {}", d.nodes_judged);
    }
}

#[test]
fn a_fault_under_cross_framework_noise_is_still_found() {
    // MindSpore (fault-free) against the perturbed, renamed PyTorch model: only ln2 of layer 1
    // is matched among the faulty places.
    let d = diagnose_case("compare_ms_vs_pt_renamed_lm_bare");
    assert!(
        source_covers(&d, 0, "Cell.layers.1.ln2.LayerNorm.forward.0"),
        "{}",
        listing(&d)
    );
}

#[test]
fn mindspore_pair_finds_the_faults_in_its_own_names() {
    assert_the_two_injected_faults(
        "compare_ms_stats",
        "Cell.layers.1.ln2.LayerNorm.forward.0",
        "Cell.layers.2.mlp.fc1.Linear.forward.0",
    );
}

#[test]
fn steps_file_reports_the_first_differing_step() {
    let d = diagnose_case("compare_tf_stats_steps");
    assert_eq!(d.step, 0);
    assert!(d.steps_checked[0].forward_differs);
    assert!(source_covers(
        &d,
        0,
        "Module.layers.1.ln2.LayerNorm.forward.0"
    ));
}

#[test]
fn two_ranks_with_the_same_fault_are_both_sources() {
    // Both processes perturb their own model (layer 0's ln2 eps, layer 1's fc1 weight): the error
    // starts on each rank by itself, so neither inherits from the other.
    let d = diagnose_case("compare_dist_ranks");
    assert_eq!(d.ranks, vec![0, 1]);
    assert_eq!(d.origin_rank, Some(0));
    assert!(d.peer_inheritance.is_empty(), "{:?}", d.peer_inheritance);
    for rank in [0, 1] {
        let heads: Vec<&graph_ascend_diagnose::Source> =
            d.sources.iter().filter(|s| s.rank == rank).collect();
        assert!(heads.len() >= 2, "rank {rank}:\n{}", listing(&d));
        let covers = |s: &graph_ascend_diagnose::Source, node: &str| {
            s.node == node || s.enclosing.iter().any(|e| e == node)
        };
        assert!(covers(heads[0], "Module.layers.0.ln2.LayerNorm.forward.0"));
        assert!(covers(heads[1], "Module.layers.1.mlp.fc1.Linear.forward.0"));
    }
}

#[test]
fn each_module_counts_the_sources_inside_it_at_any_depth() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = common::unpack("compare_tf_stats", dir.path());
    let file = graph_ascend_diagnose::CompareFile::open(&path).expect("open");
    let d = graph_ascend_diagnose::diagnose(&file, &graph_ascend_diagnose::Options::default())
        .expect("diagnose");
    let data = file.load(0, 0).expect("load");
    let sources: Vec<&str> = d.sources.iter().map(|s| s.node.as_str()).collect();
    // A name listed twice counts once; an unknown one not at all.
    let listed = sources.iter().copied().chain(sources.iter().copied());
    let inside = graph_ascend_diagnose::sources_inside(&data, listed.chain(["No.such.node"]));
    assert_eq!(inside.len(), data.npu.nodes.len());
    let count = |name: &str| {
        let i = data.npu.find(name).unwrap_or_else(|| panic!("no {name}"));
        inside[i as usize]
    };
    // The two faults: `layer_norm.3` in layers.1's ln2, `linear.10` in layers.2's fc1.
    assert_eq!(
        count("Functional.layer_norm.3.forward"),
        0,
        "a source is not inside itself"
    );
    assert_eq!(count("Module.layers.1.ln2.LayerNorm.forward.0"), 1);
    assert_eq!(count("Module.layers.2.mlp.fc1.Linear.forward.0"), 1);
    assert_eq!(count("Module.layers.2.mlp.FeedForward.forward.0"), 1);
    // The root holds both; a layer without a fault none.
    let root = data.npu.root.expect("root");
    assert_eq!(inside[root as usize], 2);
    let layer0 = data
        .npu
        .iter()
        .position(|n| n.name().starts_with("Module.layers.0.") && n.name().contains(".forward."))
        .expect("a module of layer 0");
    assert_eq!(inside[layer0], 0);
    // Only ancestors count: every module with a count holds a source below it.
    for (i, n) in data.npu.iter().enumerate() {
        let below = sources.iter().filter(|s| {
            data.npu
                .find(s)
                .is_some_and(|k| data.npu.ancestors(k).any(|a| a as usize == i))
        });
        assert_eq!(inside[i] as usize, below.count(), "{}", n.name());
    }
}
