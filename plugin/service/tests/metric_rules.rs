//! The page paints the details table from the metric rules the sidecar
//! serves with each file's config (`detailColumns`), the one table the converter and the
//! diagnosis use (`graph_ascend_dump::METRIC_RULES`), not from a copy of its own.

mod common;

use graph_ascend_service::handlers;

use common::{browser_json, logdir_with, meta, meta_request};

#[test]
fn the_config_answer_serves_the_metric_rules_in_column_order() {
    let (_dir, state) = logdir_with("compare_tf_small_tensor");
    let listing = handlers::load_meta_dir(&state);
    let tag = listing.data[0].tags[0].clone();
    let answer = handlers::load_graph_config_info(&state, meta_request(&meta("run", &tag)));
    assert!(answer.success, "{:?}", answer.error);
    let json = browser_json(&answer);
    // msprobe's keys are all still there; the rules are one more.
    for key in ["microSteps", "tooltips", "isSingleGraph", "colors", "task"] {
        assert!(json["data"].get(key).is_some(), "{key} kept");
    }
    let cols = json["data"]["detailColumns"]
        .as_array()
        .expect("detailColumns");
    let col = |name: &str| {
        cols.iter()
            .position(|c| c["name"] == name)
            .map(|i| (i, &cols[i]))
            .unwrap_or_else(|| panic!("{name} is served"))
    };
    let (norm, _) = col("Norm");
    let (max_diff, mean) = col("Mean diff");
    let (ratio_at, ratio) = col("One Thousandth Err Ratio");
    let (cosine_at, cosine) = col("Cosine");
    let (result_at, result) = col("Result");
    assert!(norm < max_diff && cosine_at < ratio_at && ratio_at < result_at);
    assert_eq!(ratio["worse"], "lower", "1.0 is the perfect ratio");
    assert_eq!(cosine["worse"], "lower");
    assert_eq!(mean["worse"], "higher");
    assert!(
        mean["threshold"].as_f64().expect("threshold") > 6.4e-9,
        "a Mean diff of -6.4e-9 is not painted"
    );
    assert_eq!(result["worse"], "", "verdict columns are not metrics");
    assert!(cols
        .iter()
        .all(|c| c["name"] != "data_name" && c["name"] != "value"));
    // Exactly the rules of the one table, no second copy.
    let served: Vec<&str> = cols
        .iter()
        .filter(|c| c["worse"] != "")
        .filter_map(|c| c["name"].as_str())
        .collect();
    let rules: Vec<&str> = graph_ascend_dump::METRIC_RULES
        .iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(served, rules);
}
