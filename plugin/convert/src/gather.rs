//! `graph-ascend gather`: the parts of a sharded conversion ([`crate::part`]) → the one
//! `.vis.db` an unsharded run writes, without reading the dumps again.
//!
//! Every part is checked first: complete, of the same run (format, version, options, inputs,
//! shard count), and every shard `0..N` present exactly once. Then the communication links
//! (`matched_distributed`, [`crate::distributed`]) are made from the `Distributed.*` rows of all
//! parts at once — the two ends of a link may sit in different shards — and the rows are copied
//! part by part, in shard order (which is the unsharded run's order, see [`crate::shard`]), into a
//! new `.vis.db` through the same bulk writer, with their links filled in. The gathered file's
//! indexes are not sorted again: each is the merge of the same index of every part (already
//! sorted, rowids shifted by the rows of the parts before), written page by page as it comes
//! ([`BulkWriter::create_sorted`]), so the gather's memory does not grow with the rows. The merge
//! reads a bounded number of parts at once (`merge_index`), so its open files do not grow with
//! the shards either.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender};

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OpenFlags, Row};

use graph_ascend_dump::FastMap;
use graph_ascend_visdb::bulk::{index_key, BulkWriter, NodeIndexSpec, Value};
use graph_ascend_visdb::schema::NODE_COLUMNS;
use graph_ascend_visdb::writer::{ConfigRow, NodeRow};

use crate::diagnosis_table;
use crate::distributed;
use crate::error::ConvertError;
use crate::open_files;
use crate::output::output_file;
use crate::part::{self, Manifest, PART_SUFFIX};

/// Rows copied per batch.
const CHUNK: usize = 1024;

/// Gathers `parts` (files, or folders whose `*.vis.part` files are taken) into a new `.vis.db`:
/// `out` itself when it names a `.vis.db` file, else `out/{build|compare}_<time>.vis.db`
/// (the folder created if missing). Never replaces a file (a taken name gets `_2`, …). Returns
/// the path written.
pub fn gather(parts: &[PathBuf], out: &Path) -> Result<PathBuf, ConvertError> {
    let files = part_files(parts)?;
    let mut found: Vec<(PathBuf, Manifest)> = Vec::with_capacity(files.len());
    for f in files {
        let m = part::read_manifest(&f)?;
        found.push((f, m));
    }
    check_one_run(&found)?;
    found.sort_by_key(|(_, m)| m.shard.index);
    check_every_shard(&found)?;
    let first = &found[0].1;
    let dest = if out.extension().is_some_and(|e| e == "db") {
        if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
            create_dir(dir)?;
        }
        out.to_path_buf()
    } else {
        create_dir(out)?;
        output_file(out, first.kind == "compare")
    };
    let links = if first.link_distributed {
        links(&found, first.overflow_check)?
    } else {
        FastMap::default()
    };
    let offsets = row_offsets(&found)?;
    // The parts' indexes are merged below: the writer keeps no index entries of its own.
    let mut writer = BulkWriter::create_sorted(&dest)?;
    // The config row of the unsharded run is made from its first unit: the first part with units.
    let config_part = found.iter().find(|(_, m)| m.units > 0).unwrap_or(&found[0]);
    let config = read_config(&config_part.0)?;
    // One thread reads the parts (SQLite, row by row) while this one writes: the two overlap.
    let (tx, rx) = sync_channel::<Batch>(4);
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| read_parts(&found, &links, tx));
        let written = (|| -> Result<(), ConvertError> {
            for batch in rx {
                match batch {
                    Batch::Stacks(rows) => {
                        writer.insert_stacks(rows.iter().map(|(a, b)| (a.as_str(), b.as_str())))?
                    }
                    Batch::Nodes(rows) => writer.insert_nodes(&rows)?,
                }
            }
            Ok(())
        })();
        // On a write error `rx` is gone, so the reader stops at its next batch.
        let read = reader.join().unwrap_or_else(|_| {
            Err(ConvertError::Usage(
                "internal: the gather's reader thread panicked".into(),
            ))
        });
        written.and(read)
    })?;
    // The parts read at once while their indexes are merged: the open files stay bounded.
    let fan_in = open_files::budget();
    for spec in writer.sorted_node_indexes() {
        merge_index(&found, &offsets, &spec, fan_in, &mut writer)?;
    }
    writer.insert_config(&config)?;
    if first.kind == "compare" {
        Ok(writer.finish_with(diagnosis_table::add_before_rename)?)
    } else {
        Ok(writer.finish()?)
    }
}

/// The rowid each part's first row takes in the gathered file, less one: the rows are copied in
/// shard order, so a part's rows `1..=n` become `offset + 1..=offset + n`. A part whose rowids
/// are not `1..=n` (not written by `convert --shard`) is refused.
fn row_offsets(found: &[(PathBuf, Manifest)]) -> Result<Vec<i64>, ConvertError> {
    let mut offsets = Vec::with_capacity(found.len());
    let mut total = 0i64;
    for (path, _) in found {
        let (count, max): (i64, i64) = open(path)?
            .query_row(
                "SELECT count(*), coalesce(max(rowid), 0) FROM tb_nodes",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| sql(path, e))?;
        if count != max {
            return Err(ConvertError::Input {
                path: path.clone(),
                message: format!(
                    "not a part as convert --shard writes it: {count} rows, numbered up to {max}"
                ),
            });
        }
        offsets.push(total);
        total += count;
    }
    Ok(offsets)
}

/// Writes the index `spec` of the gathered file by merging the same index of every part: each
/// is already sorted, so a k-way merge by (key, gathered rowid) gives the gathered file's order
/// with one entry per part in memory (the writer keeps one page per level of the tree).
///
/// A part is read through an open SQLite connection (a file): at most `fan_in` parts are read
/// at once. With more parts, each group of `fan_in` is merged into a sorted run of a temporary
/// file beside the output ([`BulkWriter::begin_runs`]), and the runs, all read through that one
/// file, are merged into the index: the open files stay bounded whatever the number of shards,
/// for one more pass over the entries.
fn merge_index(
    found: &[(PathBuf, Manifest)],
    offsets: &[i64],
    spec: &NodeIndexSpec,
    fan_in: usize,
    writer: &mut BulkWriter,
) -> Result<(), ConvertError> {
    let mut index = writer.begin_sorted(spec);
    if found.len() <= fan_in {
        merge_parts(found, offsets, spec, |values, rowid| {
            Ok(writer.push_sorted(&mut index, values, rowid)?)
        })?;
    } else {
        let mut runs = writer.begin_runs()?;
        for (parts, offsets) in found.chunks(fan_in).zip(offsets.chunks(fan_in)) {
            merge_parts(parts, offsets, spec, |values, rowid| {
                Ok(writer.push_run(&mut runs, values, rowid)?)
            })?;
            writer.end_run(&mut runs);
        }
        writer.merge_runs(&mut index, runs)?;
    }
    Ok(writer.end_sorted(index)?)
}

/// Hands `push` the entries of index `spec` of `found` (each part open at once), merged in
/// order. One thread merges while this one pushes.
fn merge_parts(
    found: &[(PathBuf, Manifest)],
    offsets: &[i64],
    spec: &NodeIndexSpec,
    mut push: impl FnMut(&[Value<'_>], i64) -> Result<(), ConvertError>,
) -> Result<(), ConvertError> {
    let (tx, rx) = sync_channel::<Vec<Entry>>(4);
    std::thread::scope(|scope| {
        // `tx` moves into the reader: the channel closes when it is done.
        let send = move |batch| tx.send(batch).is_ok();
        let reader = scope.spawn(move || merge_entries(found, offsets, spec, send));
        let written = (|| -> Result<(), ConvertError> {
            for batch in rx {
                for (values, rowid) in &batch {
                    // Blobs were refused when read (`merge_entries`).
                    let values: Vec<Value<'_>> = values
                        .iter()
                        .map(|v| Value::from_sql(v).unwrap_or(Value::Null))
                        .collect();
                    push(&values, *rowid)?;
                }
            }
            Ok(())
        })();
        // On a write error `rx` is gone, so the reader stops at its next batch; on a read
        // error the writer sees too few entries, and the reader's error is the one to report.
        let read = reader.join().unwrap_or_else(|_| {
            Err(ConvertError::Usage(
                "internal: the gather's index reader panicked".into(),
            ))
        });
        read.and(written)
    })
}

/// One index entry: the indexed values and the gathered rowid.
type Entry = (Vec<SqlValue>, i64);

/// Hands `each` the entries of index `spec` of all parts, merged in order, in batches, while it
/// returns true.
fn merge_entries(
    found: &[(PathBuf, Manifest)],
    offsets: &[i64],
    spec: &NodeIndexSpec,
    mut each: impl FnMut(Vec<Entry>) -> bool,
) -> Result<(), ConvertError> {
    let cols = spec.columns.join(", ");
    let query = format!(
        "SELECT {cols}, rowid FROM tb_nodes INDEXED BY {} ORDER BY {cols}, rowid",
        spec.name
    );
    let n = spec.columns.len();
    let conns = found
        .iter()
        .map(|(path, _)| {
            let conn = open(path)?;
            // Each part is read front to back once: a small cache is enough.
            conn.execute_batch("PRAGMA cache_size = -1024")
                .map_err(|e| sql(path, e))?;
            Ok(conn)
        })
        .collect::<Result<Vec<_>, ConvertError>>()?;
    let mut stmts = conns
        .iter()
        .zip(found)
        .map(|(c, (path, _))| c.prepare(&query).map_err(|e| sql(path, e)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut cursors = stmts
        .iter_mut()
        .zip(found)
        .map(|(s, (path, _))| s.query([]).map_err(|e| sql(path, e)))
        .collect::<Result<Vec<_>, _>>()?;
    // Per part: its next entry.
    let mut heads: Vec<Entry> = vec![(Vec::new(), 0); found.len()];
    let mut heap: BinaryHeap<Reverse<(Vec<u8>, i64, usize)>> = BinaryHeap::new();
    let mut advance = |i: usize,
                       heads: &mut Vec<Entry>,
                       heap: &mut BinaryHeap<Reverse<(Vec<u8>, i64, usize)>>|
     -> Result<(), ConvertError> {
        let path = &found[i].0;
        let Some(row) = cursors[i].next().map_err(|e| sql(path, e))? else {
            return Ok(());
        };
        let values = (0..n)
            .map(|c| row.get::<_, SqlValue>(c))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| sql(path, e))?;
        let Some(key_values) = values
            .iter()
            .map(Value::from_sql)
            .collect::<Option<Vec<_>>>()
        else {
            return Err(ConvertError::Input {
                path: path.clone(),
                message: format!(
                    "not a part as convert --shard writes it: a blob in {}",
                    spec.name
                ),
            });
        };
        let rowid = offsets[i] + row.get::<_, i64>(n).map_err(|e| sql(path, e))?;
        let mut key = Vec::new();
        index_key(&key_values, &mut key);
        drop(key_values);
        heads[i] = (values, rowid);
        heap.push(Reverse((key, rowid, i)));
        Ok(())
    };
    for i in 0..found.len() {
        advance(i, &mut heads, &mut heap)?;
    }
    let mut batch = Vec::with_capacity(CHUNK);
    while let Some(Reverse((_, _, i))) = heap.pop() {
        batch.push(std::mem::take(&mut heads[i]));
        advance(i, &mut heads, &mut heap)?;
        if batch.len() == CHUNK && !each(std::mem::replace(&mut batch, Vec::with_capacity(CHUNK))) {
            return Ok(());
        }
    }
    if !batch.is_empty() {
        each(batch);
    }
    Ok(())
}

/// What the reader thread hands to the writer, in order.
enum Batch {
    Stacks(Vec<(String, String)>),
    Nodes(Vec<NodeRow>),
}

/// Sends every part's stack rows and node rows (links filled in) in shard order; stops quietly
/// when the writer has gone (it failed, and says why).
fn read_parts(
    found: &[(PathBuf, Manifest)],
    links: &FastMap<String, String>,
    tx: SyncSender<Batch>,
) -> Result<(), ConvertError> {
    for (path, _) in found {
        let conn = open(path)?;
        let stacks = in_batches(
            &conn,
            path,
            "SELECT id, stack_info FROM tb_stack ORDER BY rowid",
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                ))
            },
            |batch| tx.send(Batch::Stacks(batch)).is_ok(),
        )?;
        let nodes = stacks
            && in_batches(
                &conn,
                path,
                &format!(
                    "SELECT {} FROM tb_nodes ORDER BY rowid",
                    NODE_COLUMNS.join(", ")
                ),
                node_row,
                |mut batch| {
                    for row in batch.iter_mut() {
                        if let Some(link) = links.get(&row.id) {
                            row.matched_distributed.clone_from(link);
                        }
                    }
                    tx.send(Batch::Nodes(batch)).is_ok()
                },
            )?;
        if !nodes {
            break;
        }
    }
    Ok(())
}

/// The part files named by `parts`: files as given, folders by their `*.vis.part` entries
/// (hidden ones, the unsealed temporaries of running or killed tasks, are not parts).
fn part_files(parts: &[PathBuf]) -> Result<Vec<PathBuf>, ConvertError> {
    let mut files = Vec::new();
    for p in parts {
        if p.is_dir() {
            let entries = std::fs::read_dir(p).map_err(|e| ConvertError::Input {
                path: p.clone(),
                message: format!("cannot list the folder: {e}"),
            })?;
            let mut here: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|f| {
                    f.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.ends_with(PART_SUFFIX) && !n.starts_with('.'))
                })
                .collect();
            if here.is_empty() {
                return Err(ConvertError::Input {
                    path: p.clone(),
                    message: format!("no part (*{PART_SUFFIX}) in this folder"),
                });
            }
            here.sort();
            files.extend(here);
        } else if p.is_file() {
            files.push(p.clone());
        } else {
            return Err(ConvertError::Input {
                path: p.clone(),
                message: "no such part file or folder".into(),
            });
        }
    }
    if files.is_empty() {
        return Err(ConvertError::Usage("gather: no part given".into()));
    }
    Ok(files)
}

/// Every part must come from the same run as the first.
fn check_one_run(found: &[(PathBuf, Manifest)]) -> Result<(), ConvertError> {
    let (first_path, first) = &found[0];
    let want = first.run_fields();
    for (path, m) in &found[1..] {
        for ((what, a), (_, b)) in want.iter().zip(m.run_fields()) {
            if *a != b {
                return Err(ConvertError::Usage(format!(
                    "{} and {} come from different runs or settings: their {what} differ \
                     ({a} / {b}); gather the parts of one run",
                    first_path.display(),
                    path.display()
                )));
            }
        }
    }
    Ok(())
}

/// Shards `0..N` each exactly once (`found` sorted by shard).
fn check_every_shard(found: &[(PathBuf, Manifest)]) -> Result<(), ConvertError> {
    for pair in found.windows(2) {
        if pair[0].1.shard.index == pair[1].1.shard.index {
            return Err(ConvertError::Usage(format!(
                "{} and {} are both shard {}",
                pair[0].0.display(),
                pair[1].0.display(),
                pair[0].1.shard
            )));
        }
    }
    let count = found[0].1.shard.count;
    let have: Vec<u32> = found.iter().map(|(_, m)| m.shard.index).collect();
    let missing: Vec<String> = (0..count)
        .filter(|i| have.binary_search(i).is_err())
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        let shown = if missing.len() > 20 {
            format!("{} … ({} in all)", missing[..20].join(", "), missing.len())
        } else {
            missing.join(", ")
        };
        return Err(ConvertError::Usage(format!(
            "missing parts: shard(s) {shown} of {count} (expected next to {}); re-run those \
             shards, then gather again",
            found[0].0.display()
        )));
    }
    Ok(())
}

fn create_dir(dir: &Path) -> Result<(), ConvertError> {
    std::fs::create_dir_all(dir).map_err(|source| ConvertError::Output {
        path: dir.to_path_buf(),
        source,
    })
}

fn open(path: &Path) -> Result<Connection, ConvertError> {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|e| sql(path, e))
}

fn sql(path: &Path, e: rusqlite::Error) -> ConvertError {
    ConvertError::Input {
        path: path.to_path_buf(),
        message: format!("cannot read the part: {e}"),
    }
}

/// `matched_distributed` of every linked `Distributed.*` row of all parts, by row id.
fn links(
    found: &[(PathBuf, Manifest)],
    overflow_check: bool,
) -> Result<FastMap<String, String>, ConvertError> {
    let mut rows: Vec<NodeRow> = Vec::new();
    for (path, _) in found {
        let conn = open(path)?;
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {} FROM tb_nodes WHERE is_distributed = 1 ORDER BY rowid",
                NODE_COLUMNS.join(", ")
            ))
            .map_err(|e| sql(path, e))?;
        let got = stmt
            .query_map([], node_row)
            .and_then(|r| r.collect::<Result<Vec<_>, _>>())
            .map_err(|e| sql(path, e))?;
        rows.extend(got);
    }
    Ok(distributed::links(rows, overflow_check))
}

/// A `tb_nodes` row as the converter made it ([`NODE_COLUMNS`] order).
fn node_row(r: &Row) -> rusqlite::Result<NodeRow> {
    let text = |i: usize| -> rusqlite::Result<String> {
        Ok(r.get::<_, Option<String>>(i)?.unwrap_or_default())
    };
    Ok(NodeRow {
        id: text(0)?,
        graph_id: text(1)?,
        node_order: r.get(2)?,
        node_name: text(3)?,
        node_type: text(4)?,
        up_node: text(5)?,
        sub_nodes: text(6)?,
        precision_index: r.get(7)?,
        overflow_level: r.get(8)?,
        micro_step_id: r.get(9)?,
        matched_node_link: text(10)?,
        stack_id: text(11)?,
        parallel_merge_info: text(12)?,
        matched_distributed: text(13)?,
        modified: r.get(14)?,
        input_data: text(15)?,
        output_data: text(16)?,
        data_source: text(17)?,
        dump_data_dir: r.get(18)?,
        step: r.get(19)?,
        rank: r.get(20)?,
        is_distributed: r.get::<_, Option<i64>>(21)?.unwrap_or(0),
    })
}

/// Calls `each` with batches of at most [`CHUNK`] rows of `query`, in order, while it returns
/// true; returns whether every row was handed over.
fn in_batches<T>(
    conn: &Connection,
    path: &Path,
    query: &str,
    read: impl Fn(&Row) -> rusqlite::Result<T>,
    mut each: impl FnMut(Vec<T>) -> bool,
) -> Result<bool, ConvertError> {
    let mut stmt = conn.prepare(query).map_err(|e| sql(path, e))?;
    let rows = stmt.query_map([], |r| read(r)).map_err(|e| sql(path, e))?;
    let mut batch = Vec::with_capacity(CHUNK);
    for row in rows {
        batch.push(row.map_err(|e| sql(path, e))?);
        if batch.len() == CHUNK && !each(std::mem::replace(&mut batch, Vec::with_capacity(CHUNK))) {
            return Ok(false);
        }
    }
    Ok(batch.is_empty() || each(batch))
}

/// The part's `tb_config` row.
fn read_config(path: &Path) -> Result<ConfigRow, ConvertError> {
    let conn = open(path)?;
    conn.query_row(
        "SELECT graph_type, task, tool_tip, micro_steps, overflow_check, node_colors, \
         rank_list, step_list FROM tb_config",
        [],
        |r| {
            Ok(ConfigRow {
                graph_type: r.get(0)?,
                task: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                tool_tip: r.get(2)?,
                micro_steps: r.get::<_, Option<i64>>(3)?.unwrap_or(1),
                overflow_check: r.get::<_, Option<i64>>(4)?.unwrap_or(0),
                node_colors: r.get(5)?,
                rank_list: r.get(6)?,
                step_list: r.get(7)?,
            })
        },
    )
    .map_err(|e| sql(path, e))
}
