//! The `divergenceMap` route (beyond msprobe): the divergence map of a compare file
//! (`graph_ascend_diagnose::map`, docs/diagnosis.md §12). The map of full resolution of a depth and
//! axis is computed once per file version and cached with the diagnoses
//! ([`crate::diagnosis_cache`]); each number of columns (each zoom) is aggregated from it, and kept
//! too. The file's diagnosis made on the way is kept as well, so the Diagnosis panel answers at
//! once afterwards. While a map is computed (every graph of the file is read, one step at a
//! time), a request with `progress` answers at once with graphs read of total and the map of the
//! steps judged so far, aggregated to its columns ([`crate::map_progress`]); while the first step
//! is read, the map of its graphs read so far (`MapProgress::preview`: the first cells need not
//! wait for a whole step of graphs).

use std::sync::Arc;

use graph_ascend_diagnose::diagnose::Direction;
use graph_ascend_diagnose::map::{
    Cell, ColumnAxis, DivergenceMap, FineMap, MapOptions, DEFAULT_MAX_COLUMNS,
};
use graph_ascend_proto as pb;

use super::diagnosis::{failed, int, label};
use super::reply::{answer, HandlerError, Result};
use super::selection::{select, Selection};
use crate::catalog::GraphFile;
use crate::diagnosis_cache::{Key, Weight};
use crate::map_progress::compute;
use crate::messages::Lang;
use crate::state::State;

/// The most columns a request may ask for.
const MAX_COLUMNS: u32 = 16_384;

/// `divergenceMap`: the map of the file the request names.
pub fn divergence_map(state: &State, req: pb::DivergenceMapRequest) -> pb::DivergenceMapResponse {
    let lang = Lang::parse(&req.lang);
    if req.progress {
        return answer(lang, progress_of(state, &req));
    }
    answer(
        lang,
        map_of(state, &req).map(|data| pb::DivergenceMapResponse {
            success: true,
            error: None,
            data: Some(pb::DivergenceMapData::clone(&data)),
            progress: None,
        }),
    )
}

/// How far the computation of the map a request names is, with the map of the steps judged so far.
fn progress_of(state: &State, req: &pb::DivergenceMapRequest) -> Result<pb::DivergenceMapResponse> {
    let (sel, key, options) = selected(state, req)?;
    let p = state.map_progress.get(&sel.file, fine_key(key));
    Ok(pb::DivergenceMapResponse {
        success: true,
        error: None,
        data: p
            .as_ref()
            .and_then(|p| p.partial.as_deref())
            .map(|fine| message(&fine.aggregate(options.max_columns))),
        progress: p.map(|p| pb::DivergenceMapProgress {
            graphs_read: i32::try_from(p.graphs_read).unwrap_or(i32::MAX),
            graphs_total: i32::try_from(p.graphs_total).unwrap_or(i32::MAX),
            done: p.done,
        }),
    })
}

/// The file a request names and the cache key of its map.
fn selected(state: &State, req: &pb::DivergenceMapRequest) -> Result<(Selection, Key, MapOptions)> {
    let meta = pb::MetaData {
        run: req.run.clone(),
        tag: req.tag.clone(),
        r#type: req.r#type.clone(),
        lang: req.lang.clone(),
        ..pb::MetaData::default()
    };
    let sel = select(state, Some(&meta))?;
    let depth = u32::try_from(req.depth).unwrap_or(0);
    let max_columns = match u32::try_from(req.max_columns) {
        Ok(0) | Err(_) => DEFAULT_MAX_COLUMNS as u32,
        Ok(n) => n.min(MAX_COLUMNS),
    };
    let key = Key::Map {
        depth,
        micro_batches: req.micro_batches,
        max_columns,
    };
    let options = MapOptions {
        depth: (depth > 0).then_some(depth),
        columns: if req.micro_batches {
            ColumnAxis::MicroBatches
        } else {
            ColumnAxis::Ranks
        },
        max_columns: max_columns as usize,
    };
    Ok((sel, key, options))
}

/// The key of the map of full resolution the map of `key` is aggregated from.
fn fine_key(key: Key) -> Key {
    match key {
        Key::Map {
            depth,
            micro_batches,
            ..
        } => Key::FineMap {
            depth,
            micro_batches,
        },
        other => other,
    }
}

fn map_of(state: &State, req: &pb::DivergenceMapRequest) -> Result<Arc<pb::DivergenceMapData>> {
    let (sel, key, options) = selected(state, req)?;
    let file = sel.file.clone();
    state.diagnoses.get(&sel.file, key, || {
        let fine = fine_map_of(state, &file, fine_key(key), &options)?;
        Ok::<_, HandlerError>(message(&fine.aggregate(options.max_columns)))
    })
}

/// The map of full resolution of `options`' depth and axis, computed (with progress) once per
/// file version. A computation of it already under way (the file's diagnosis started when the
/// page opened the file computes the default map on the way:
/// [`crate::map_progress::diagnosis_with_default_map`]) is
/// waited for rather than made a second time beside it (twice the memory and the time).
fn fine_map_of(
    state: &State,
    file: &Arc<GraphFile>,
    key: Key,
    options: &MapOptions,
) -> Result<Arc<FineMap>> {
    state.diagnoses.get(file, key, || {
        if let Some(fine) = state.map_progress.wait_for(file, key) {
            return Ok(fine);
        }
        let progress = state.map_progress.start(file, key);
        let (diagnosis, fine) = compute(&progress, file, options.shape()).map_err(failed)?;
        // The same judgements gave the file's diagnosis: the panel need not judge it again.
        state
            .diagnoses
            .get(file, Key::File, || Ok::<_, HandlerError>(diagnosis))?;
        Ok::<_, HandlerError>(fine)
    })
}

fn direction(d: Direction) -> &'static str {
    match d {
        Direction::Forward => "forward",
        Direction::Backward => "backward",
        Direction::Update => "update",
    }
}

fn cell(c: Option<&Cell>) -> pb::DivergenceMapCell {
    let Some(c) = c else {
        return pb::DivergenceMapCell::default();
    };
    pb::DivergenceMapCell {
        held: true,
        ratio: c.ratio,
        err: c.err,
        tolerance: c.tolerance,
        step: int(c.step),
        rank: int(c.rank),
        micro_step: int(c.micro_step),
        node: c.node.clone(),
        sources: i32::try_from(c.sources).unwrap_or(i32::MAX),
        source: c.source.clone().unwrap_or_default(),
        source_rank: c.source_rank.map(int),
        from_rank: c.from_rank.map(int),
    }
}

/// The map as the route's message.
pub(crate) fn message(m: &DivergenceMap) -> pb::DivergenceMapData {
    pb::DivergenceMapData {
        mode: label(&m.mode),
        depth: i32::try_from(m.depth).unwrap_or(i32::MAX),
        depth_rule: label(&m.depth_rule),
        axis: label(&m.axis),
        steps: m.steps.iter().copied().map(int).collect(),
        ranks: m.ranks.iter().copied().map(int).collect(),
        columns: m
            .columns
            .iter()
            .map(|c| pb::DivergenceMapColumn {
                step: int(c.step),
                rank_first: int(c.rank_first),
                rank_last: int(c.rank_last),
                micro_first: c.micro_first.map(int),
                micro_last: c.micro_last.map(int),
                width: i32::try_from(c.width).unwrap_or(i32::MAX),
            })
            .collect(),
        bands: m
            .bands
            .iter()
            .map(|b| pb::DivergenceMapBand {
                direction: direction(b.direction).into(),
                rows: b
                    .rows
                    .iter()
                    .map(|r| pb::DivergenceMapRow {
                        module: r.module.clone(),
                        label: r.label.clone(),
                        depth: i32::try_from(r.depth).unwrap_or(i32::MAX),
                        cells: r.cells.iter().map(|c| cell(c.as_ref())).collect(),
                    })
                    .collect(),
            })
            .collect(),
        first_source: m.first_source.as_ref().map(|f| pb::DivergenceMapCellAt {
            band: i32::try_from(f.band).unwrap_or(i32::MAX),
            row: i32::try_from(f.row).unwrap_or(i32::MAX),
            column: i32::try_from(f.column).unwrap_or(i32::MAX),
            step: int(f.step),
            rank: int(f.rank),
            node: f.node.clone(),
        }),
    }
}

impl Weight for FineMap {
    fn weight(&self) -> usize {
        FineMap::weight(self)
    }
}

impl Weight for pb::DivergenceMapData {
    fn weight(&self) -> usize {
        self.bands
            .iter()
            .flat_map(|b| &b.rows)
            .map(|r| {
                r.module.len() * 2
                    + r.cells
                        .iter()
                        .map(|c| 96 + c.node.len() + c.source.len())
                        .sum::<usize>()
            })
            .sum::<usize>()
            + 64 * self.columns.len()
    }
}
