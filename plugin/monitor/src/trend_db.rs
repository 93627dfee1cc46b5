//! Reading msprobe's `*.trend.db` (`msprobe data2db --format monitor`, `TrendSql` of
//! `db_manager.py`): `monitoring_metrics` (metric_id, metric_name: the v1 file prefix),
//! `monitoring_targets` (target_id, target_name, vpp_stage, micro_step) and `trend_data`
//! (rank, step, target_id, metric_id, one REAL column per statistic), read one rank at a time
//! in primary-key order (so that a rank's rows are streamed, never all ranks at once).
//!
//! Steps are the database's: with data2db's default `--micro_step true` a step is the global
//! micro-step index (the training step when each step has one micro-batch). Values are as
//! data2db clipped them (±1e9; inf as 1e9 + 1). Targets are numbered in the order data2db met
//! them, activations first in the CSV's (execution) order; the order of the backward is lost
//! (an `actv_grad` target shares the number of its forward name).
use std::collections::HashMap;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::error::MonitorError;
use crate::name::{self, Kind, Role, SeriesKey};
use crate::rank_table::RankTable;

fn open(path: &Path) -> Result<Connection, MonitorError> {
    Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| MonitorError::db(path, e))
}

fn columns(conn: &Connection, path: &Path, table: &str) -> Result<Vec<String>, MonitorError> {
    let mut stmt = conn
        .prepare(&format!("PRAGMA table_info({table})"))
        .map_err(|e| MonitorError::db(path, e))?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(1))
        .map_err(|e| MonitorError::db(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| MonitorError::db(path, e))?;
    if names.is_empty() {
        return Err(MonitorError::format(
            path,
            format!("no table `{table}`: not a monitor trend.db (msprobe data2db)"),
        ));
    }
    Ok(names)
}

/// The ranks in the database.
pub fn ranks(path: &Path) -> Result<Vec<u32>, MonitorError> {
    let conn = open(path)?;
    columns(&conn, path, "trend_data")?;
    // Each distinct rank by a seek on the primary key's first column (no scan of the rows).
    let mut ranks = Vec::new();
    let mut stmt = conn
        .prepare("SELECT rank FROM trend_data WHERE rank > ?1 ORDER BY rank LIMIT 1")
        .map_err(|e| MonitorError::db(path, e))?;
    let mut last = i64::MIN;
    loop {
        let next: Option<i64> = stmt
            .query_row([last], |r| r.get(0))
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })
            .map_err(|e| MonitorError::db(path, e))?;
        let Some(rank) = next else { break };
        ranks.push(
            u32::try_from(rank)
                .map_err(|_| MonitorError::format(path, format!("rank {rank} out of range")))?,
        );
        last = rank;
    }
    Ok(ranks)
}

/// A target: the series key of each metric it may have (activations parse their name).
struct Target {
    stage: i32,
    name: String,
    micro_step: u32,
}

/// Reads rank `rank`'s statistic `stat` into `table`.
pub fn read_rank(
    path: &Path,
    rank: u32,
    stat: &str,
    table: &mut RankTable,
) -> Result<(), MonitorError> {
    let conn = open(path)?;
    let stats = columns(&conn, path, "trend_data")?;
    if !stats.iter().any(|c| c == stat)
        || ["rank", "step", "target_id", "metric_id"].contains(&stat)
    {
        return Err(MonitorError::format(
            path,
            format!(
                "no statistic `{stat}` in trend_data (columns: {})",
                stats.join(",")
            ),
        ));
    }
    let db = |e| MonitorError::db(path, e);
    let mut metrics: HashMap<i64, Kind> = HashMap::new();
    let mut stmt = conn
        .prepare("SELECT metric_id, metric_name FROM monitoring_metrics")
        .map_err(db)?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
        .map_err(db)?;
    for row in rows {
        let (id, name) = row.map_err(db)?;
        // `other` (the optimizer's extra metrics) names no module or parameter to pair.
        if let Some(kind) = Kind::from_prefix(&name) {
            metrics.insert(id, kind);
        }
    }
    let mut targets: HashMap<i64, Target> = HashMap::new();
    let mut stmt = conn
        .prepare("SELECT target_id, target_name, vpp_stage, micro_step FROM monitoring_targets")
        .map_err(db)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
            ))
        })
        .map_err(db)?;
    for row in rows {
        let (id, name, stage, micro) = row.map_err(db)?;
        let (prefix, full) = name::split_stage(&name);
        targets.insert(
            id,
            Target {
                stage: name::stage_of(i32::try_from(stage).unwrap_or(0), prefix),
                name: full.to_string(),
                micro_step: u32::try_from(micro).unwrap_or(0),
            },
        );
    }
    let sql = format!(
        "SELECT step, target_id, metric_id, \"{stat}\" FROM trend_data WHERE rank = ?1 ORDER BY step, target_id, metric_id"
    );
    let mut stmt = conn.prepare(&sql).map_err(db)?;
    let mut rows = stmt.query([rank]).map_err(db)?;
    let mut keys: HashMap<(i64, i64), Option<SeriesKey>> = HashMap::new();
    while let Some(row) = rows.next().map_err(db)? {
        let step: i64 = row.get(0).map_err(db)?;
        let target: i64 = row.get(1).map_err(db)?;
        let metric: i64 = row.get(2).map_err(db)?;
        let Some(value) = row.get::<_, Option<f64>>(3).map_err(db)? else {
            continue;
        };
        let key = keys.entry((target, metric)).or_insert_with(|| {
            let kind = *metrics.get(&metric)?;
            let t = targets.get(&target)?;
            let (base, role) = if kind.is_activation() {
                name::parse_v1_activation(&t.name)?
            } else {
                (t.name.as_str(), Role::None)
            };
            Some(SeriesKey {
                kind,
                stage: t.stage,
                base: base.to_string(),
                role,
                micro_step: t.micro_step,
            })
        });
        if let Some(key) = key {
            table.insert(key, step, value).map_err(|_| {
                MonitorError::format(
                    path,
                    format!("rank {rank}: step {step} is too far from the series' other steps"),
                )
            })?;
        }
    }
    Ok(())
}
