//! Times conversion on demand and the matching writes on a real dump pair.
//!
//! ```text
//! cargo run --release -p graph-ascend-service --example edit_bench -- <logdir> <npu dump> <bench dump>
//! ```
//! `<npu dump>` and `<bench dump>` are folders relative to `<logdir>` (e.g. the two
//! `../shared/fixtures/big/big_stats_*.tar.xz` unpacked into it). The example converts them through
//! the job table (as `convertToGraph` does), then times, on the result: the matched relations,
//! unmatching and rematching a leaf (with its twin), and unmatching and rematching the largest
//! top-level module with all its descendants. Every timing is the median of five runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use graph_ascend_proto as pb;
use graph_ascend_service::{handlers, State};
use tokio_stream::StreamExt;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [logdir, npu, bench] = args.as_slice() else {
        return Err("usage: edit_bench <logdir> <npu dump> <bench dump>".into());
    };
    let state = Arc::new(State::new(logdir.into()));
    let out = format!("bench_{}", std::process::id());
    let started = Instant::now();
    let r = handlers::convert_to_graph(
        &state,
        "bench",
        pb::ConvertRequest {
            npu_path: npu.clone(),
            bench_path: bench.clone(),
            output_path: out.clone(),
            ..Default::default()
        },
    );
    if !r.success {
        return Err(format!("convertToGraph: {:?}", r.error).into());
    }
    let events: Vec<pb::ConvertProgress> = handlers::progress_stream(&state, "bench", "")
        .collect()
        .await;
    let convert_time = started.elapsed();
    let last = events.last().ok_or("no progress events")?;
    if last.status != "done" {
        return Err(format!("conversion ended {}: {:?}", last.status, last.error).into());
    }
    println!(
        "conversion (job, engine, publish): {}  ({} progress events)",
        ms(convert_time),
        events.len()
    );
    let listing = handlers::load_meta_dir(&state);
    let tag = listing
        .data
        .iter()
        .find(|r| r.run == out)
        .and_then(|r| r.tags.first().cloned())
        .ok_or("the converted file is not listed")?;
    let meta = pb::MetaData {
        run: out.clone(),
        tag,
        r#type: "db".into(),
        lang: "en".into(),
        micro_step: Some(-1),
        step: Some(0),
        rank: Some(0),
    };
    let meta_req = || pb::MetaRequest {
        meta_data: Some(meta.clone()),
        client_id: String::new(),
    };
    let rel = handlers::load_graph_matched_relations(&state, meta_req());
    let d = rel.data.ok_or("no relations")?;
    println!(
        "nodes: {} target ({} matched), {} golden",
        d.npu_match_nodes.len() + d.npu_un_match_nodes.len(),
        d.npu_match_nodes.len(),
        d.bench_match_nodes.len() + d.bench_un_match_nodes.len()
    );
    let times = (0..5)
        .map(|_| {
            let t = Instant::now();
            handlers::load_graph_matched_relations(&state, meta_req());
            t.elapsed()
        })
        .collect();
    println!("loadGraphMatchedRelations: {}", ms(median(times)));

    let req = |npu: &str, bench: &str, children: bool| pb::MatchNodesRequest {
        npu_node_name: npu.into(),
        bench_node_name: bench.into(),
        meta_data: Some(meta.clone()),
        is_match_children: children,
        is_un_match_children: children,
        client_id: String::new(),
    };
    let leaf = d
        .npu_match_nodes
        .iter()
        .find(|p| p.key.contains(".forward") && !p.key.starts_with("Module"))
        .ok_or("no matched API node")?
        .clone();
    let mut del = Vec::new();
    let mut add = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let r = handlers::delete_match_nodes(&state, req(&leaf.key, &leaf.value, false));
        del.push(t.elapsed());
        if !r.success {
            return Err(format!("delete {}: {:?}", leaf.key, r.error).into());
        }
        let t = Instant::now();
        let r = handlers::add_match_nodes(&state, req(&leaf.key, &leaf.value, false));
        add.push(t.elapsed());
        if !r.success {
            return Err(format!("add {}: {:?}", leaf.key, r.error).into());
        }
    }
    println!(
        "leaf {}: deleteMatchNodes {}, addMatchNodes {} (each with its twin, answer included)",
        leaf.key,
        ms(median(del)),
        ms(median(add))
    );

    // The matched top-level module with the most direct children.
    let root = handlers::change_node_expand_state(
        &state,
        "bench",
        pb::NodeRequest {
            node_info: Some(pb::NodeRef {
                node_name: "root".into(),
                node_type: "NPU".into(),
            }),
            meta_data: Some(meta.clone()),
            client_id: "bench".into(),
        },
    );
    let module = root
        .data
        .iter()
        .filter(|n| !n.is_root && n.node_type == 0 && n.matched_node_link.last() == Some(&n.key))
        .max_by_key(|n| n.height)
        .ok_or("no matched top-level module")?
        .key
        .clone();
    let mut del = Vec::new();
    let mut add = Vec::new();
    let mut pairs = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let r = handlers::delete_match_nodes(&state, req(&module, &module, true));
        del.push(t.elapsed());
        pairs = r.data.as_ref().and_then(|d| d.matched_success).unwrap_or(0);
        let t = Instant::now();
        let r = handlers::add_match_nodes(&state, req(&module, &module, true));
        add.push(t.elapsed());
        if !r.success {
            return Err(format!("add {module}: {:?}", r.error).into());
        }
    }
    println!(
        "module {module} with descendants ({pairs} pairs): deleteMatchNodes {}, addMatchNodes {}",
        ms(median(del)),
        ms(median(add))
    );
    Ok(())
}
