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

use std::sync::{Arc, Mutex};

use graph_ascend_diagnose::diagnose::Direction;
use graph_ascend_diagnose::map::{
    fine_map_with_progress, Cell, ColumnAxis, DivergenceMap, FineMap, MapOptions, MapShape,
    DEFAULT_MAX_COLUMNS,
};
use graph_ascend_diagnose::{Diagnosis, Options};
use graph_ascend_proto as pb;

use super::diagnosis::{failed, int, label, open};
use super::reply::{answer, HandlerError, Result};
use super::selection::{select, Selection};
use crate::catalog::GraphFile;
use crate::diagnosis_cache::{DiagnosisCache, Key, Weight};
use crate::map_progress::{MapProgressBoard, Progress};
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
/// page opened the file computes the default map on the way: [`diagnosis_with_default_map`]) is
/// waited for rather than made a second time beside it (twice the memory and the time).
fn fine_map_of(
    state: &State,
    file: &Arc<GraphFile>,
    key: Key,
    options: &MapOptions,
) -> Result<Arc<FineMap>> {
    state.diagnoses.get(file, key, || {
        if let Some(fine) = wait_for(&state.map_progress, file, key) {
            return Ok(fine);
        }
        let progress = state.map_progress.start(file, key);
        let (diagnosis, fine) = compute(&progress, file, options.shape())?;
        // The same judgements gave the file's diagnosis: the panel need not judge it again.
        state
            .diagnoses
            .get(file, Key::File, || Ok::<_, HandlerError>(diagnosis))?;
        Ok::<_, HandlerError>(fine)
    })
}

/// How often a request polls a computation of its map made elsewhere ([`wait_for`]).
const POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// The map of `key` from a computation under way or done on this version of `file` that left it
/// on the board, once it is done; `None` when there is none, or it failed.
fn wait_for(board: &MapProgressBoard, file: &Arc<GraphFile>, key: Key) -> Option<FineMap> {
    let shared = board.shared(file, key)?;
    loop {
        {
            let p = crate::sync::lock(&shared);
            if p.done {
                return p.result.as_deref().cloned();
            }
        }
        std::thread::sleep(POLL);
    }
}

/// Computes the diagnosis and the map of full resolution in `shape` of `file`, telling `progress`
/// (graphs read, the map so far) and marking it done, with the map, at the end.
fn compute(
    progress: &Mutex<Progress>,
    file: &Arc<GraphFile>,
    shape: MapShape,
) -> Result<(Diagnosis, FineMap)> {
    let built = open(file).and_then(|compare| {
        fine_map_with_progress(&compare, &Options::default(), shape, true, &mut |p| {
            // The judged steps so far, or (while the first step is read) the map of its graphs
            // read so far.
            let partial = p.partial.or(p.preview).map(|m| Arc::new(m.clone()));
            let mut shown = crate::sync::lock(progress);
            shown.graphs_read = p.graphs_read;
            shown.graphs_total = p.graphs_total;
            if partial.is_some() {
                shown.partial = partial;
            }
        })
        .map_err(failed)
    });
    let mut shown = crate::sync::lock(progress);
    shown.done = true;
    shown.partial = None;
    shown.result = built.as_ref().ok().map(|(_, fine)| Arc::new(fine.clone()));
    built
}

/// The map the Map panel asks for first: the default depth, ranks as columns.
const DEFAULT_MAP: Key = Key::FineMap {
    depth: 0,
    micro_batches: false,
};

/// The file's diagnosis (as `diagnose`), computed with its default map from the same judgements
/// (some 2 % more time), the map's progress on `board`: when the page opens a file of several
/// graphs, its diagnosis starts at once, and the Map panel, asked for afterwards, shows it
/// filling in and takes it from the board ([`wait_for`]) instead of reading every graph a second
/// time beside it. Keep the map with [`keep_default_map`] once the diagnosis is kept.
pub(crate) fn diagnosis_with_default_map(
    board: &MapProgressBoard,
    file: &Arc<GraphFile>,
) -> Result<(Diagnosis, FineMap)> {
    let progress = board.start(file, DEFAULT_MAP);
    compute(&progress, file, MapOptions::default().shape())
}

/// Keeps the default map made by [`diagnosis_with_default_map`] in the cache, then drops it from
/// the board. Called with no other slot of `cache` held: a request for the map may hold the map's
/// slot while it waits for the computation (it takes the map from the board), and then its own
/// map is kept.
pub(crate) fn keep_default_map(
    cache: &DiagnosisCache,
    board: &MapProgressBoard,
    file: &Arc<GraphFile>,
    fine: FineMap,
) {
    let _ = cache.get(file, DEFAULT_MAP, || Ok::<_, HandlerError>(fine));
    if let Some(shared) = board.shared(file, DEFAULT_MAP) {
        crate::sync::lock(&shared).result = None;
    }
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
