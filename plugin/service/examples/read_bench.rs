//! Times the read-side handlers directly (no gRPC, no TensorBoard) on the first file of a logdir.
//!
//! ```text
//! cargo run --release -p graph-ascend-service --example read_bench -- <logdir> [repeat] [only]
//! ```
//! Prints the median and the worst of `repeat` (default 5) runs of each navigation request, the
//! first call of each separately (it may build the per-file caches), and the size of the answer's
//! JSON. Each run includes rendering the answer as the browser's JSON, as `CallJson` does.
//! With `only` (a request's label, e.g. `module toggle`), only that request is timed: for a
//! profiler (`perf record`) to see it alone. The example runs on the sidecar's allocator
//! (mimalloc, `plugin/cli/src/main.rs`): with glibc's, allocation was most of a module expansion.

use std::sync::Arc;
use std::time::{Duration, Instant};

use graph_ascend_proto as pb;
use graph_ascend_proto::json::{to_vec, Fields};
use graph_ascend_service::{handlers, State};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn ms(d: Duration) -> String {
    format!("{:8.2} ms", d.as_secs_f64() * 1000.0)
}

fn time<T: Fields + prost::Message>(
    only: Option<&str>,
    label: &str,
    repeat: usize,
    f: impl FnMut() -> T,
) {
    time_after(only, label, repeat, || {}, f)
}

/// As [`time`], with `setup` run untimed before each call.
fn time_after<T: Fields + prost::Message>(
    only: Option<&str>,
    label: &str,
    repeat: usize,
    mut setup: impl FnMut(),
    mut f: impl FnMut() -> T,
) {
    if only.is_some_and(|o| o != label) {
        return;
    }
    setup();
    let t = Instant::now();
    let first = to_vec(&f());
    let first_time = t.elapsed();
    let mut times = Vec::new();
    for _ in 0..repeat {
        setup();
        let t = Instant::now();
        let _ = to_vec(&f());
        times.push(t.elapsed());
    }
    times.sort();
    println!(
        "{label:20} first {}  median {}  max {}  {:>10} bytes",
        ms(first_time),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1]),
        first.len()
    );
}

/// Resident memory of this process in MB (Linux), 0 elsewhere.
fn rss_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let logdir = args.first().ok_or("usage: read_bench <logdir> [repeat]")?;
    let repeat: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(5);
    let only = args.get(2).map(String::as_str);
    let state = Arc::new(State::new(logdir.into()));
    let listing = handlers::load_meta_dir(&state);
    let run = listing.data.first().ok_or("no runs")?;
    let meta = pb::MetaData {
        run: run.run.clone(),
        tag: run.tags.first().cloned().ok_or("no tags")?,
        r#type: "db".into(),
        lang: "en".into(),
        micro_step: Some(-1),
        step: Some(0),
        rank: Some(0),
    };
    let mreq = || pb::MetaRequest {
        meta_data: Some(meta.clone()),
        ..Default::default()
    };
    let rss_before = rss_mb();
    let t = Instant::now();
    for side in ["NPU", "Bench"] {
        handlers::search_nodes(
            &state,
            pb::SearchNodesRequest {
                meta_data: Some(meta.clone()),
                graph_type: side.into(),
                query: "no such name".into(),
                limit: 1,
                ..Default::default()
            },
        );
    }
    println!(
        "indexing both sides: {}  resident memory {} MB -> {} MB",
        ms(t.elapsed()),
        rss_before,
        rss_mb()
    );
    let list = handlers::load_graph_all_node_list(&state, mreq());
    let names = list
        .data
        .first()
        .map(|l| l.names.clone())
        .unwrap_or_default();
    let leaves: Vec<&String> = names
        .iter()
        .filter(|n| {
            n.starts_with("Functional.") || n.starts_with("Torch.") || n.starts_with("Tensor.")
        })
        .collect();
    let deep = leaves
        .get(leaves.len() / 2)
        .map(|s| s.to_string())
        .unwrap_or_else(|| "root".into());
    let module = names
        .iter()
        .rev()
        .find(|n| n.starts_with("Module.") && n.contains(".forward."))
        .cloned()
        .unwrap_or_default();
    let node = |name: &str| pb::NodeRequest {
        meta_data: Some(meta.clone()),
        node_info: Some(pb::NodeRef {
            node_name: name.to_owned(),
            node_type: "NPU".into(),
        }),
        ..Default::default()
    };
    time(only, "root expansion", repeat, || {
        handlers::change_node_expand_state(&state, "bench", node("root"))
    });
    time(only, "root+module", repeat, || {
        handlers::change_node_expand_state(&state, "bench", node("root"));
        handlers::change_node_expand_state(&state, "bench", node(&module))
    });
    // A module opened in a pane just laid out from its root: the page's first expansion.
    time_after(
        only,
        "module after root",
        repeat,
        || {
            handlers::change_node_expand_state(&state, "bench", node("root"));
        },
        || handlers::change_node_expand_state(&state, "bench", node(&module)),
    );
    // The module opened and closed in turn, each answering the whole visible graph (as
    // tests/shim/bench_shim.py's expansion does).
    handlers::change_node_expand_state(&state, "bench", node("root"));
    time(only, "module toggle", repeat, || {
        handlers::change_node_expand_state(&state, "bench", node(&module))
    });
    time(only, "root+deep", repeat, || {
        handlers::change_node_expand_state(&state, "bench", node("root"));
        handlers::change_node_expand_state(&state, "bench", node(&deep))
    });
    time(only, "node info", repeat, || {
        handlers::get_node_info(&state, node(&deep))
    });
    time(only, "full node list", repeat, || {
        handlers::load_graph_all_node_list(&state, mreq())
    });
    time(only, "name search", repeat, || {
        handlers::search_nodes(
            &state,
            pb::SearchNodesRequest {
                meta_data: Some(meta.clone()),
                graph_type: "NPU".into(),
                query: "linear.12".into(),
                limit: 200,
                ..Default::default()
            },
        )
    });
    time(only, "precision filter", repeat, || {
        handlers::filter_nodes(
            &state,
            pb::FilterNodesRequest {
                meta_data: Some(meta.clone()),
                r#type: "precision".into(),
                values: Some(prost_types::ListValue {
                    values: ["pass", "warning", "error"]
                        .iter()
                        .map(|s| prost_types::Value {
                            kind: Some(prost_types::value::Kind::StringValue((*s).into())),
                        })
                        .chain([prost_types::Value {
                            kind: Some(prost_types::value::Kind::NumberValue(-1.0)),
                        }])
                        .collect(),
                }),
                ..Default::default()
            },
        )
    });
    time(only, "matched relations", repeat, || {
        handlers::load_graph_matched_relations(&state, mreq())
    });
    Ok(())
}
