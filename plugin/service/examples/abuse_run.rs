//! The abuse run, repeatable (a benchmark-like tool, not a test; `fuzz/abuse_run.sh` runs it):
//! hostile and careless files and requests through a live sidecar, with the figures the trust
//! review asks for.
//!
//! `cargo run --release -p graph-ascend-service --example abuse_run -- BINARY SEED [FILES] [REQUESTS] [LEFT_OUT]`
//!
//! (LEFT_OUT: classes not planted, comma-separated, to see what a figure comes from.)
//!
//! From SEED, writes FILES files (default 200) into a fresh logdir, each of one class of the
//! review: a trigger (endless write, recursion), a view in place of `tb_nodes`, a hierarchy chain
//! 500–30,000 deep, a cycle in `sub_nodes`, random bytes flipped in a good file, a 5–40 MB tooltip
//! or a 100,000-entry rank list in `tb_config`, a link to a file outside the logdir, a FIFO at a
//! file's `-wal`, a root of 100,000 children, and good compare files whose folders hold a FIFO,
//! a link and garbage where a matching configuration is named. Then starts `BINARY serve` on it
//! and sends REQUESTS requests (default 3,000) from four clients at once: every route of the page
//! on random files and nodes (reads, expansions, searches, filters, matches, colours, CSV exports,
//! diagnoses), and malformed ones (random bytes, unknown methods, huge names). Meanwhile one quick
//! client reads the configuration of a small good file in a loop; its waits are recorded with
//! whether a heavy request (an expansion, a hierarchy, a node list, an export, a diagnosis) was
//! running.
//!
//! Reported: files and requests tried, requests answered, failed at the gRPC level or unanswered
//! after 120 s, whether the sidecar lived to the end, its peak memory (VmHWM), the quick client's
//! worst wait while a heavy request ran (and its median), and whether any file outside the edited
//! ones changed (the files outside the logdir, the read-only link targets, the files beside a
//! FIFO journal). Exit status 1 when the sidecar died, a request went unanswered or a file that
//! must not change did.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use graph_ascend_proto as pb;
use graph_ascend_testkit::special_files::make_fifo;
use graph_ascend_testkit::synthetic_visdb::{chain_node, write, write_chain, Shape};
use live_sidecar::{call, meta, Client, Sidecar};
use prost::Message;

mod live_sidecar;

/// xorshift64*: the run's only randomness, from SEED.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const CLASSES: &[&str] = &[
    "trigger_endless",
    "trigger_recursive",
    "view_nodes",
    "deep_chain",
    "sub_nodes_cycle",
    "flipped_bytes",
    "big_tooltip",
    "big_rank_list",
    "link_outside",
    "fifo_wal",
    "wide_root",
    "compare_with_bad_configs",
];

/// One file of the logdir: its run (= tag) and class.
struct Planted {
    run: String,
    class: &'static str,
}

fn sql(path: &Path, batch: &str) -> Result<(), Box<dyn std::error::Error>> {
    let conn = rusqlite::Connection::open(path)?;
    conn.execute_batch(batch)?;
    Ok(())
}

fn small(dest: &Path, compare: bool) -> Result<PathBuf, Box<dyn std::error::Error>> {
    Ok(write(dest, Shape::with_nodes(300, 3, compare))?)
}

/// Writes file `i` of class `class` as `<logdir>/<run>/<run>.vis.db`; files that must never
/// change go to `guarded`.
fn plant(
    rng: &mut Rng,
    logdir: &Path,
    outside: &Path,
    i: usize,
    class: &'static str,
    guarded: &mut Vec<PathBuf>,
) -> Result<Planted, Box<dyn std::error::Error>> {
    let run = format!("{class}_{i}");
    let dir = logdir.join(&run);
    std::fs::create_dir_all(&dir)?;
    let dest = dir.join(format!("{run}.vis.db"));
    match class {
        "trigger_endless" => {
            small(&dest, true)?;
            sql(
                &dest,
                "CREATE TRIGGER grow AFTER UPDATE ON tb_nodes BEGIN \
                 INSERT INTO tb_nodes SELECT * FROM tb_nodes; END;",
            )?;
        }
        "trigger_recursive" => {
            small(&dest, true)?;
            sql(
                &dest,
                "PRAGMA recursive_triggers = ON; CREATE TRIGGER again AFTER UPDATE ON tb_nodes \
                 BEGIN UPDATE tb_nodes SET modified = modified + 1 WHERE id = new.id; END;",
            )?;
        }
        "view_nodes" => {
            small(&dest, false)?;
            sql(
                &dest,
                "ALTER TABLE tb_nodes RENAME TO real_nodes; \
                 CREATE VIEW tb_nodes AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) \
                 SELECT real_nodes.* FROM real_nodes, n;",
            )?;
        }
        "deep_chain" => {
            write_chain(&dest, 500 + rng.below(29_500))?;
        }
        "sub_nodes_cycle" => {
            let depth = 3 + rng.below(50);
            write_chain(&dest, depth)?;
            let last = chain_node(depth - 1);
            sql(
                &dest,
                &format!(
                    "UPDATE tb_nodes SET sub_nodes = '[\"{}\"]' WHERE node_name = '{last}';",
                    chain_node(rng.below(depth))
                ),
            )?;
        }
        "flipped_bytes" => {
            small(&dest, rng.below(2) == 0)?;
            let mut bytes = std::fs::read(&dest)?;
            for _ in 0..1 + rng.below(64) {
                let at = rng.below(bytes.len());
                bytes[at] ^= 1 << rng.below(8);
            }
            std::fs::write(&dest, bytes)?;
        }
        "big_tooltip" => {
            small(&dest, false)?;
            let mb = 5 + rng.below(36);
            sql(
                &dest,
                &format!(
                    "UPDATE tb_config SET tool_tip = '\"' || hex(zeroblob({})) || '\"';",
                    mb << 19
                ),
            )?;
        }
        "big_rank_list" => {
            small(&dest, false)?;
            sql(
                &dest,
                "UPDATE tb_config SET rank_list = (WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL \
                 SELECT x + 1 FROM n WHERE x < 99999) SELECT '[' || group_concat(x) || ']' FROM n);",
            )?;
        }
        "link_outside" => {
            let target = outside.join(format!("{run}.vis.db"));
            small(&target, true)?;
            std::os::unix::fs::symlink(&target, &dest)?;
            guarded.push(target);
        }
        "fifo_wal" => {
            small(&dest, true)?;
            let mut wal = dest.as_os_str().to_owned();
            wal.push("-wal");
            make_fifo(Path::new(&wal));
            guarded.push(dest.clone());
        }
        "wide_root" => {
            write(
                &dest,
                Shape {
                    layers: 100_000,
                    modules: 0,
                    leaves: 0,
                    compare: false,
                    steps: 1,
                    ranks: 1,
                },
            )?;
        }
        _ => {
            small(&dest, true)?;
            make_fifo(&dir.join("fifo.vis.config"));
            std::fs::write(dir.join("garbage.vis.config"), b"{\"a\": [1, 2")?;
            let secret = outside.join(format!("{run}.secret"));
            std::fs::write(&secret, b"{\"x\": \"y\"}")?;
            std::os::unix::fs::symlink(&secret, dir.join("link.vis.config"))?;
            guarded.push(secret);
        }
    }
    Ok(Planted { run, class })
}

fn fingerprint(path: &Path) -> Option<(u64, Vec<u8>)> {
    let bytes = std::fs::read(path).ok()?;
    Some((bytes.len() as u64, bytes))
}

/// The names of a file's nodes (for requests that name nodes), from its node list.
async fn node_names(client: &mut Client, run: &str) -> Vec<String> {
    let request = pb::MetaRequest {
        meta_data: Some(meta(run)),
        client_id: "names".into(),
    }
    .encode_to_vec();
    let (_, answer) = call(client, "LoadGraphAllNodeList", request).await;
    let Some(json) = answer else {
        return Vec::new();
    };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&json) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let mut stack = vec![&v["data"]];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::String(s) if names.len() < 2_000 => names.push(s.clone()),
            serde_json::Value::Array(a) => stack.extend(a.iter()),
            serde_json::Value::Object(o) => stack.extend(o.values()),
            _ => {}
        }
    }
    names
}

/// Whether a method's work grows with the file (what the quick client must not wait for).
fn heavy(method: &str) -> bool {
    matches!(
        method,
        "ChangeNodeExpandState"
            | "UpdateHierarchyData"
            | "LoadGraphAllNodeList"
            | "Diagnose"
            | "DivergenceMap"
            | "SearchNodes"
            | "FilterNodes"
            | "ExportCsv"
    )
}

/// One random request: its method and body.
fn request(
    rng: &mut Rng,
    runs: &[String],
    names: &BTreeMap<String, Vec<String>>,
) -> (String, Vec<u8>) {
    let run = rng.pick(runs).clone();
    let known = names.get(&run).map(Vec::as_slice).unwrap_or(&[]);
    let node = |rng: &mut Rng| -> String {
        match rng.below(6) {
            0 => "root".into(),
            1 => chain_node(rng.below(30_000)),
            2 => "x".repeat(1 + rng.below(100_000)),
            _ if !known.is_empty() => rng.pick(known).clone(),
            _ => "DefaultModel".into(),
        }
    };
    let m = Some(meta(&run));
    let side = if rng.below(2) == 0 { "NPU" } else { "Bench" };
    let client = format!("client-{}", rng.below(8));
    let (method, body) = match rng.below(18) {
        0 => (
            "LoadGraphConfigInfo",
            pb::MetaRequest {
                meta_data: m,
                client_id: client,
            }
            .encode_to_vec(),
        ),
        1 => (
            "LoadGraphAllNodeList",
            pb::MetaRequest {
                meta_data: m,
                client_id: client,
            }
            .encode_to_vec(),
        ),
        2..=4 => (
            "ChangeNodeExpandState",
            pb::NodeRequest {
                node_info: Some(pb::NodeRef {
                    node_name: node(rng),
                    node_type: side.into(),
                }),
                meta_data: m,
                client_id: client,
            }
            .encode_to_vec(),
        ),
        5 => (
            "UpdateHierarchyData",
            pb::UpdateHierarchyRequest {
                graph_type: side.into(),
                meta_data: m,
                client_id: client,
            }
            .encode_to_vec(),
        ),
        6 => (
            "GetNodeInfo",
            pb::NodeRequest {
                node_info: Some(pb::NodeRef {
                    node_name: node(rng),
                    node_type: side.into(),
                }),
                meta_data: m,
                client_id: client,
            }
            .encode_to_vec(),
        ),
        7 => (
            "SearchNodes",
            pb::SearchNodesRequest {
                meta_data: m,
                graph_type: side.into(),
                query: ["%", "'; DROP TABLE tb_nodes; --", "forward", "_", ""][rng.below(5)].into(),
                limit: rng.below(100_000) as i32,
                client_id: client,
            }
            .encode_to_vec(),
        ),
        8 => (
            "AddMatchNodesByConfig",
            pb::MatchByConfigRequest {
                config_file: [
                    "fifo.vis.config",
                    "link.vis.config",
                    "garbage.vis.config",
                    "../x.vis.config",
                    "none.vis.config",
                ][rng.below(5)]
                .into(),
                meta_data: m,
                client_id: client,
            }
            .encode_to_vec(),
        ),
        9 => {
            let (npu, bench) = (node(rng), node(rng));
            (
                if rng.below(2) == 0 {
                    "AddMatchNodes"
                } else {
                    "DeleteMatchNodes"
                },
                pb::MatchNodesRequest {
                    npu_node_name: npu,
                    bench_node_name: bench,
                    meta_data: m,
                    is_match_children: rng.below(2) == 0,
                    is_un_match_children: rng.below(2) == 0,
                    client_id: client,
                }
                .encode_to_vec(),
            )
        }
        10 => (
            "UpdateColors",
            pb::UpdateColorsRequest {
                meta_data: m,
                colors: [
                    "{}",
                    "{\"#FF0000\": {\"value\": [0, 1], \"description\": \"x\"}}",
                    "{\"#FF0000\": {\"value\": [1e308, -1e308]}}",
                    "[[[[[[[[[[",
                ][rng.below(4)]
                .into(),
                client_id: client,
            }
            .encode_to_vec(),
        ),
        11 => (
            "SaveMatchedRelations",
            pb::MetaRequest {
                meta_data: m,
                client_id: client,
            }
            .encode_to_vec(),
        ),
        12 => (
            "Diagnose",
            pb::DiagnoseRequest {
                run: run.clone(),
                tag: run.clone(),
                r#type: "db".into(),
                lang: "en".into(),
                top: rng.below(1_000) as i32,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        13 => (
            "LoadGraphMatchedRelations",
            pb::MetaRequest {
                meta_data: m,
                client_id: client,
            }
            .encode_to_vec(),
        ),
        14 => {
            // Random bytes as a body.
            let body = (0..rng.below(4_096)).map(|_| rng.next() as u8).collect();
            (
                *rng.pick(&[
                    "GetNodeInfo",
                    "ChangeNodeExpandState",
                    "UpdateColors",
                    "AddMatchNodes",
                ]),
                body,
            )
        }
        15 => ("NoSuchMethod", Vec::new()),
        16 => (
            "ExportCsv",
            pb::ExportCsvRequest {
                run: run.clone(),
                tag: run.clone(),
                r#type: "db".into(),
                lang: "en".into(),
                step: rng.below(2).checked_sub(1).map(|_| 0),
                rank: None,
                client_id: client,
            }
            .encode_to_vec(),
        ),
        _ => {
            // A selection of another step, rank or a run that does not exist.
            let mut meta = meta(if rng.below(2) == 0 { &run } else { "../../etc" });
            meta.step = Some(rng.next() as i32);
            meta.rank = Some(-1);
            meta.micro_step = Some(rng.next() as i32);
            (
                "LoadGraphConfigInfo",
                pb::MetaRequest {
                    meta_data: Some(meta),
                    client_id: client,
                }
                .encode_to_vec(),
            )
        }
    };
    (method.to_owned(), body)
}

/// An export through its own (streaming) RPC, drained: answered when the stream ends.
async fn export(client: &mut Client, body: &[u8]) -> (Duration, Option<Vec<u8>>) {
    let started = Instant::now();
    let Ok(request) = pb::ExportCsvRequest::decode(body) else {
        return (started.elapsed(), None);
    };
    let Ok(answer) = client.export_csv(request).await else {
        return (started.elapsed(), None);
    };
    let mut stream = answer.into_inner();
    let mut bytes = 0usize;
    while let Ok(Some(chunk)) = stream.message().await {
        bytes += chunk.data.len();
    }
    (started.elapsed(), Some(bytes.to_string().into_bytes()))
}

#[derive(Default)]
struct Tally {
    answered: usize,
    grpc_errors: usize,
    unanswered: usize,
    per_method: BTreeMap<String, usize>,
    grpc_errors_per_method: BTreeMap<String, usize>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(binary), Some(seed)) = (args.first().map(PathBuf::from), args.get(1)) else {
        return Err("usage: abuse_run BINARY SEED [FILES] [REQUESTS]".into());
    };
    let seed: u64 = seed.parse()?;
    let files: usize = args.get(2).map_or(Ok(200), |s| s.parse())?;
    let requests: usize = args.get(3).map_or(Ok(3_000), |s| s.parse())?;
    // Classes left out (comma-separated), to see what a figure comes from.
    let left_out: Vec<&str> = args.get(4).map_or(Vec::new(), |s| s.split(',').collect());
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);

    let work = tempfile::tempdir()?;
    let logdir = work.path().join("logdir");
    let outside = work.path().join("outside");
    std::fs::create_dir_all(&outside)?;
    std::fs::create_dir_all(logdir.join("quick"))?;
    small(&logdir.join("quick/quick.vis.db"), false)?;
    let mut guarded = Vec::new();
    let mut planted = Vec::new();
    let mut by_class: BTreeMap<&str, usize> = BTreeMap::new();
    for i in 0..files {
        // At most a few 100,000-box files: they are big, not many.
        let mut class = *rng.pick(CLASSES);
        if class == "wide_root" && by_class.get(class).copied().unwrap_or(0) >= 3 {
            class = "deep_chain";
        }
        if left_out.contains(&class) {
            continue;
        }
        let p = plant(&mut rng, &logdir, &outside, i, class, &mut guarded)?;
        *by_class.entry(p.class).or_default() += 1;
        planted.push(p);
    }
    let before: Vec<_> = guarded.iter().map(|p| fingerprint(p)).collect();

    let mut sidecar = Sidecar::start(&binary, &logdir, work.path()).await?;
    let runs: Vec<String> = planted.iter().map(|p| p.run.clone()).collect();
    let mut names = BTreeMap::new();
    {
        let mut client = sidecar.connect().await?;
        // The listing first (every file opened once), then the node names of the files that have
        // them.
        let _ = call(&mut client, "LoadMetaDir", Vec::new()).await;
        for p in planted
            .iter()
            .filter(|p| p.class == "compare_with_bad_configs" || p.class == "link_outside")
        {
            names.insert(p.run.clone(), node_names(&mut client, &p.run).await);
        }
    }
    let names = Arc::new(names);
    let runs = Arc::new(runs);

    let heavy_running = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let quick = {
        let mut client = sidecar.connect().await?;
        let (heavy_running, stop) = (heavy_running.clone(), stop.clone());
        tokio::spawn(async move {
            let request = pb::MetaRequest {
                meta_data: Some(meta("quick")),
                client_id: "quick".into(),
            }
            .encode_to_vec();
            let mut during_heavy = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let heavy_before = heavy_running.load(Ordering::SeqCst) > 0;
                let (took, answer) =
                    call(&mut client, "LoadGraphConfigInfo", request.clone()).await;
                if heavy_before || heavy_running.load(Ordering::SeqCst) > 0 {
                    during_heavy.push(took);
                }
                if answer.is_none() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            during_heavy
        })
    };

    let tally = Arc::new(Mutex::new(Tally::default()));
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for w in 0..4u64 {
        let mut client = sidecar.connect().await?;
        let (tally, next, runs, names, heavy_running) = (
            tally.clone(),
            next.clone(),
            runs.clone(),
            names.clone(),
            heavy_running.clone(),
        );
        let mut rng = Rng(rng.next() ^ (w + 1));
        workers.push(tokio::spawn(async move {
            while next.fetch_add(1, Ordering::SeqCst) < requests {
                let (method, body) = request(&mut rng, &runs, &names);
                let is_heavy = heavy(&method);
                if is_heavy {
                    heavy_running.fetch_add(1, Ordering::SeqCst);
                }
                let answered = tokio::time::timeout(Duration::from_secs(120), async {
                    if method == "ExportCsv" {
                        export(&mut client, &body).await
                    } else {
                        call(&mut client, &method, body).await
                    }
                })
                .await;
                if is_heavy {
                    heavy_running.fetch_sub(1, Ordering::SeqCst);
                }
                let mut t = tally.lock().expect("tally");
                *t.per_method.entry(method.clone()).or_default() += 1;
                match answered {
                    Ok((_, Some(_))) => t.answered += 1,
                    Ok((_, None)) => {
                        t.grpc_errors += 1;
                        *t.grpc_errors_per_method.entry(method.clone()).or_default() += 1;
                    }
                    Err(_) => {
                        t.unanswered += 1;
                        eprintln!("unanswered after 120 s: {method}");
                    }
                }
            }
        }));
    }
    for w in workers {
        w.await?;
    }
    stop.store(true, Ordering::Relaxed);
    let mut waits = quick.await?;
    let elapsed = started.elapsed();
    let alive = sidecar.alive();
    let peak_kb = sidecar.peak_kb();
    drop(sidecar);
    let changed: Vec<_> = guarded
        .iter()
        .zip(&before)
        .filter(|(p, b)| fingerprint(p) != **b)
        .map(|(p, _)| p.display().to_string())
        .collect();

    waits.sort();
    let t = tally.lock().expect("tally");
    println!(
        "seed {seed}: {files} files ({by_class:?}), {requests} requests in {:.0} s",
        elapsed.as_secs_f64()
    );
    println!("requests per method: {:?}", t.per_method);
    println!(
        "answered {}, gRPC errors {}, unanswered after 120 s {}",
        t.answered, t.grpc_errors, t.unanswered
    );
    println!(
        "gRPC errors per method (malformed bodies, unknown methods): {:?}",
        t.grpc_errors_per_method
    );
    println!(
        "sidecar alive at the end: {alive}; peak memory {} MB",
        peak_kb.map_or(0, |k| k / 1024)
    );
    let ms = |d: Option<&Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    println!(
        "quick waits while a heavy request ran: {} (median {:.1} ms, worst {:.1} ms)",
        waits.len(),
        ms(waits.get(waits.len() / 2)),
        ms(waits.last())
    );
    println!("guarded files changed: {changed:?}");
    if !alive || t.unanswered > 0 || !changed.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
