//! Step 4, write: graphs → rows → one `.vis.db` (named by [`crate::output`]), never replacing
//! a file (a second conversion of the same second gets `…_2.vis.db`, see
//! [`graph_ascend_visdb::bulk::BulkWriter::finish`]), or a shard's part ([`write_part`]).
//!
//! Rows are made in parallel, chunk by chunk, while a writer thread writes them into the file's
//! pages (`BulkWriter`: the SQLite format without SQLite's one-row-at-a-time inserts and index
//! builds). Each graph is freed as soon as its rows are made.

use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use rayon::prelude::*;

use graph_ascend_diagnose::TableBuilder;
use graph_ascend_dump::FastMap;
use graph_ascend_visdb::bulk::BulkWriter;
use graph_ascend_visdb::stale;
use graph_ascend_visdb::writer::{ConfigRow, NodeRow};

use super::run::Run;
use crate::compare;
use crate::diagnosis_table;
use crate::distributed;
use crate::error::ConvertError;
use crate::export::{self, ExportContext, GraphPlan};
use crate::graph::Graph;
use crate::node::NodeOp;
use crate::options::ConvertOptions;
use crate::output::output_path;
use crate::part::{self, Manifest};
use crate::timing;

/// The graphs of a conversion, in the order their rows are written.
pub(crate) type Graphs = Vec<(Graph, ExportContext)>;

/// Writes `graphs` and `config` into a new `.vis.db` in the output folder and returns its path;
/// `link_distributed`: compute the communication links across ranks (msprobe's
/// `distributed_analyzer`) first.
pub(crate) fn write(
    run: &Run,
    opts: &ConvertOptions,
    graphs: Graphs,
    config: &ConfigRow,
    link_distributed: bool,
) -> Result<PathBuf, ConvertError> {
    run.check()?;
    let dest = output_path(opts)?;
    write_to(
        run,
        &dest,
        graphs,
        config,
        Finish {
            link_distributed,
            overflow_check: opts.overflow_check,
            diagnosis_table: true,
        },
    )
}

/// How [`write_to`] finishes a file.
pub(crate) struct Finish {
    /// Compute the communication links across ranks (msprobe's `distributed_analyzer`) first.
    pub link_distributed: bool,
    pub overflow_check: bool,
    /// Add our own diagnosis table to a compare file before it takes its name
    /// ([`crate::diagnosis_table`]); a shard's part has none (its gather adds it).
    pub diagnosis_table: bool,
}

/// [`write`] to `dest` (or its next free numbered name); a shard writes its part so.
pub(crate) fn write_to(
    run: &Run,
    dest: &std::path::Path,
    graphs: Graphs,
    config: &ConfigRow,
    finish: Finish,
) -> Result<PathBuf, ConvertError> {
    let Finish {
        link_distributed,
        overflow_check,
        diagnosis_table,
    } = finish;
    let write_phase = timing::phase(|| "write rows".into());
    let mut graphs = graphs;
    let writer = BulkWriter::create(dest)?;
    let plans: Vec<GraphPlan> = graphs
        .iter()
        .map(|(g, ctx)| export::plan_graph(g, ctx))
        .collect();
    // Communication links need every rank's Distributed.* rows; they are few, so they are made
    // (and linked) first, and every row leaves for the file complete.
    let links = if link_distributed {
        distributed_links(&graphs, &plans, overflow_check)?
    } else {
        FastMap::default()
    };
    run.rows_to_write(plans.iter().map(|p| p.order.len() as u64).sum());
    let (tx, rx) = sync_channel::<WriteMsg>(2);
    let path = std::thread::scope(|scope| {
        // Our table is made of the rows as they are written, on a thread of its own.
        let table = (diagnosis_table && config.graph_type == "compare").then(|| {
            let (rows_tx, rows_rx) = sync_channel::<Vec<NodeRow>>(2);
            let builder = scope.spawn(move || {
                let mut table = TableBuilder::new();
                for rows in rows_rx {
                    rows.iter().for_each(|row| table.push(row));
                }
                table
            });
            (rows_tx, builder)
        });
        let writer_thread = scope.spawn(move || write_rows(run, writer, rx, config, table));
        let produced = (|| -> Result<(), ConvertError> {
            for (i, mut plan) in plans.into_iter().enumerate() {
                run.check()?;
                // A target graph compared as it is written reads its golden partner, next.
                let (head, tail) = graphs.split_at_mut(i + 1);
                let (graph, ctx) = &mut head[i];
                let partner = partner_of(ctx, tail);
                let stacks = std::mem::take(&mut plan.stacks);
                if tx.send(WriteMsg::Stacks(stacks)).is_err() {
                    return Ok(());
                }
                let n = plan.order.len();
                let mut lo = 0;
                while lo < n {
                    run.check()?;
                    let hi = (lo + ROW_CHUNK).min(n);
                    let rows: Vec<NodeRow> = (lo..hi)
                        .into_par_iter()
                        .map(|k| {
                            let mut row = export::node_row(graph, ctx, &plan, k, partner)?;
                            if let Some(link) = links.get(&row.id) {
                                row.matched_distributed.clone_from(link);
                            }
                            Ok(row)
                        })
                        .collect::<Result<_, ConvertError>>()?;
                    let mut rows = rows;
                    if ctx.compare_with_next.is_some() {
                        compared_precision(graph, &plan.order[lo..hi], &mut rows);
                    }
                    if tx.send(WriteMsg::Nodes(rows)).is_err() {
                        // The writer failed: its error is returned below.
                        return Ok(());
                    }
                    // A node's items (most of a graph's memory) are only in its own row:
                    // free them now, to make room for the writer's index entries.
                    for &n in &plan.order[lo..hi] {
                        let node = &mut graph.nodes[n];
                        node.set_items(Vec::new(), Vec::new());
                    }
                    lo = hi;
                }
                // Written, and no graph written later reads it (a target reads its partner,
                // written after it): free it.
                *graph = Graph::empty();
            }
            run.check()?;
            let _ = tx.send(WriteMsg::Finish);
            Ok(())
        })();
        drop(tx);
        let written = writer_thread.join().unwrap_or_else(|_| {
            Err(ConvertError::Usage(
                "internal: the writer thread panicked".into(),
            ))
        });
        produced?;
        written
    })?;
    write_phase.done();
    run.finish(format!("written {}", path.display()));
    Ok(path)
}

/// Writes a shard's `graphs` as its part ([`crate::part`]) in the output folder and returns the part's path.
pub(crate) fn write_part(
    run: &Run,
    opts: &ConvertOptions,
    manifest: &Manifest,
    graphs: Graphs,
    config: &ConfigRow,
) -> Result<PathBuf, ConvertError> {
    let dir = &opts.output;
    std::fs::create_dir_all(dir).map_err(|source| ConvertError::Output {
        path: dir.clone(),
        source,
    })?;
    stale::remove_stale(dir, part::UNSEALED_PREFIX);
    let unsealed = dir.join(format!(
        "{}{}.{}",
        part::UNSEALED_PREFIX,
        stale::owner_tag(),
        manifest.file_name()
    ));
    // Links are made by the gather, which sees every rank.
    let written = write_to(
        run,
        &unsealed,
        graphs,
        config,
        Finish {
            link_distributed: false,
            overflow_check: opts.overflow_check,
            diagnosis_table: false,
        },
    )?;
    let dest = dir.join(manifest.file_name());
    part::seal(&written, manifest, &dest).inspect_err(|_| {
        let _ = std::fs::remove_file(&written);
    })?;
    Ok(dest)
}

/// Keeps the precision index of rows compared as they were made on their nodes, and gives each
/// `api_collection` row the worst of its children's (rows in post-order: children first).
fn compared_precision(graph: &mut Graph, nodes: &[usize], rows: &mut [NodeRow]) {
    for (&n, row) in nodes.iter().zip(rows) {
        if graph.nodes[n].op == NodeOp::ApiCollection {
            row.precision_index = Some(compare::collection_precision(graph, n));
        }
        graph.nodes[n].set_precision_index(row.precision_index);
    }
}

/// `matched_distributed` of every linked `Distributed.*` row, by row id (msprobe's
/// `distributed_analyzer`, across all ranks and steps of the conversion).
fn distributed_links(
    graphs: &Graphs,
    plans: &[GraphPlan],
    overflow_check: bool,
) -> Result<FastMap<String, String>, ConvertError> {
    let mut rows: Vec<NodeRow> = Vec::new();
    for (i, ((graph, ctx), plan)) in graphs.iter().zip(plans).enumerate() {
        let partner = partner_of(ctx, &graphs[i + 1..]);
        for (k, &n) in plan.order.iter().enumerate() {
            if graph.id(n).starts_with("Distributed") {
                rows.push(export::node_row(graph, ctx, plan, k, partner)?);
            }
        }
    }
    Ok(distributed::links(rows, overflow_check))
}

/// The graph whose items a graph's rows are compared with as they are made: the next one in
/// the list, when its context asks for it.
fn partner_of<'g>(ctx: &ExportContext, later: &'g [(Graph, ExportContext)]) -> Option<&'g Graph> {
    ctx.compare_with_next
        .and_then(|_| later.first())
        .map(|(g, _)| g)
}

/// Rows formatted per parallel chunk (and per message to the writer thread).
const ROW_CHUNK: usize = 1024;

/// What the row producer sends to the writer thread.
enum WriteMsg {
    Nodes(Vec<NodeRow>),
    Stacks(Vec<(String, String)>),
    /// Every row was sent: index, commit. A channel closed without it means the run
    /// stopped (cancelled or failed) and the temporary file is dropped.
    Finish,
}

/// The thread that makes our diagnosis table of the rows written: where they go, and its
/// handle (it returns the table once the rows are all sent).
type TableThread<'s> = (
    SyncSender<Vec<NodeRow>>,
    std::thread::ScopedJoinHandle<'s, TableBuilder>,
);

/// The writer thread: inserts what it receives (and hands the rows to `table`'s thread), then
/// writes the config row, builds the indexes, commits, adds our diagnosis table when there is
/// a `table`, and renames. Rows written are reported to `run`.
fn write_rows(
    run: &Run,
    mut writer: BulkWriter,
    rx: Receiver<WriteMsg>,
    config: &ConfigRow,
    table: Option<TableThread<'_>>,
) -> Result<PathBuf, ConvertError> {
    let mut finished = false;
    let (table_rows, table_thread) = table.unzip();
    for msg in rx {
        match msg {
            WriteMsg::Nodes(rows) => {
                writer.insert_nodes(&rows)?;
                run.rows_written(rows.len() as u64);
                if let Some(tx) = &table_rows {
                    // A table thread that stopped leaves the file without the table.
                    let _ = tx.send(rows);
                }
            }
            WriteMsg::Stacks(stacks) => {
                writer.insert_stacks(stacks.iter().map(|(a, b)| (a.as_str(), b.as_str())))?;
            }
            WriteMsg::Finish => {
                finished = true;
                break;
            }
        }
    }
    if !finished {
        return Err(ConvertError::Cancelled);
    }
    writer.insert_config(config)?;
    drop(table_rows);
    let p = timing::phase(|| "indexes + commit".into());
    let path = match table_thread {
        Some(thread) => writer.finish_with(|temp| match thread.join() {
            Ok(table) => diagnosis_table::add_built_before_rename(table, temp),
            Err(_) => Err(std::io::Error::other(
                "internal: the diagnosis table's thread panicked",
            )),
        })?,
        None => writer.finish()?,
    };
    p.done();
    Ok(path)
}
