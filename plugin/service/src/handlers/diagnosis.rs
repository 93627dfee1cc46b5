//! The diagnosis routes (beyond msprobe): `diagnosis`, where a compare first went wrong, and
//! `exportCsv`, every matched pair of a compare as CSV (a download).
//!
//! Both read the stored rows of any compare `.vis.db`, msprobe's included, through
//! `graph_ascend_diagnose` (the rules: `docs/diagnosis.md`), on a connection of their own; the
//! file is never written. Diagnoses are kept per file version ([`crate::diagnosis_cache`]).

use std::collections::HashSet;
use std::io::{Read, Seek, Write};
use std::sync::Arc;

use graph_ascend_diagnose::{
    diagnose as diagnose_file, diagnose_step, CompareFile, Diagnosis, LearnedFrom,
    LearnedTolerances, Options, RankData, ReasonPart,
};
use graph_ascend_proto as pb;

use super::reply::{answer, Failure, HandlerError, Result};
use super::selection::{file_of, select};
use crate::catalog::GraphFile;
use crate::diagnosis_cache::{DiagnosisCache, Key, Weight};
use crate::map_progress::{diagnosis_with_default_map, keep_default_map, MapProgressBoard};
use crate::messages::{Lang, Msg};
use crate::state::State;

/// Sources answered when the request names no `top`, and the most it may ask for.
const DEFAULT_TOP: usize = 50;
const MAX_TOP: usize = 10_000;
/// The content type of `exportCsv` answers.
pub const CSV_CONTENT_TYPE: &str = "text/csv; charset=utf-8";
/// Bytes of CSV per chunk of a download.
const CHUNK_BYTES: usize = 256 * 1024;

/// `diagnosis`: the file's ranked sources and first inf/NaN, and (with `states`) the verdict of
/// every differing node of the shown step and rank.
pub fn diagnose(state: &State, req: pb::DiagnoseRequest) -> pb::DiagnoseResponse {
    answer(Lang::parse(&req.lang), diagnosis(state, &req))
}

fn diagnosis(state: &State, req: &pb::DiagnoseRequest) -> Result<pb::DiagnoseResponse> {
    let meta = pb::MetaData {
        run: req.run.clone(),
        tag: req.tag.clone(),
        r#type: req.r#type.clone(),
        lang: req.lang.clone(),
        micro_step: req.micro_step,
        step: req.step,
        rank: req.rank,
    };
    let sel = select(state, Some(&meta))?;
    let top = match usize::try_from(req.top) {
        Ok(0) | Err(_) => DEFAULT_TOP,
        Ok(n) => n.min(MAX_TOP),
    };
    let reference = if req.reference_tag.is_empty() {
        None
    } else {
        Some(file_of(state, &req.reference_run, &req.reference_tag, "")?)
    };
    let (whole, states) = match &reference {
        None => {
            let whole = file_diagnosis(state, &sel.file)?;
            let states = if req.states {
                Some(states(state, &sel.file, &whole, sel.step, sel.rank)?)
            } else {
                None
            };
            (whole, states)
        }
        Some(r) => referenced(
            state,
            &sel.file,
            r,
            req.states.then_some((sel.step, sel.rank)),
        )?,
    };
    Ok(pb::DiagnoseResponse {
        success: true,
        error: None,
        data: Some(message(&whole, top)),
        states,
    })
}

/// The file's diagnosis with the tolerances learned from `reference` (a compare of the
/// catalog), and with `view`, the verdicts of that step and rank judged with them. Both cached.
fn referenced(
    state: &State,
    file: &Arc<GraphFile>,
    reference: &GraphFile,
    view: Option<(i64, i64)>,
) -> Result<(Arc<Diagnosis>, Option<pb::DiagnosisStates>)> {
    let id = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        reference.path.hash(&mut h);
        h.finish()
    };
    let options = || -> Result<Options> {
        let compare = open(file)?;
        let learned =
            LearnedTolerances::from_reference(&reference.path, &compare).map_err(failed)?;
        Ok(Options {
            learned: Some(Arc::new(learned)),
            ..Options::default()
        })
    };
    let whole: Arc<Diagnosis> = state.diagnoses.get(
        file,
        Key::Referenced {
            reference: id,
            view: None,
        },
        || diagnose_file(&*open(file)?, &options()?).map_err(failed),
    )?;
    let Some((step, rank)) = view else {
        return Ok((whole, None));
    };
    let verdicts = state.diagnoses.get(
        file,
        Key::Referenced {
            reference: id,
            view: Some((step, rank)),
        },
        || {
            let opts = options()?;
            let of_step = if whole.steps_checked.iter().any(|c| c.step == step) {
                whole.clone()
            } else {
                let opts = Options {
                    step: Some(step),
                    ..opts.clone()
                };
                Arc::new(diagnose_file(&*open(file)?, &opts).map_err(failed)?)
            };
            let compare = open(file)?;
            let data = compare.load(step, rank).map_err(failed)?;
            Ok::<_, HandlerError>(verdicts_of(&compare, &data, &of_step, step, rank, &opts))
        },
    )?;
    Ok((whole, Some(pb::DiagnosisStates::clone(&verdicts))))
}

/// The file's diagnosis: started here unless the page's opening of the file started it
/// ([`start`]), then waited for; answered as soon as the sources are judged (the verdicts of the
/// colour mode follow on the same thread).
fn file_diagnosis(state: &State, file: &Arc<GraphFile>) -> Result<Arc<Diagnosis>> {
    if let Some(started) = start(state, file, Ahead::Asked) {
        // Until the thread holds the diagnosis's slot (or has given up): then `get` waits for it.
        let _ = started.recv();
    }
    state.diagnoses.get(file, Key::File, || {
        diagnose_file(&*open(file)?, &Options::default()).map_err(failed)
    })
}

/// Starts the file's diagnosis, unless it is kept or under way: when the page opens a compare
/// file (so that the Diagnosis panel finds it ready, or under way, when it asks), in the
/// background, below every answer ([`crate::background`]); and on the panel's first request, on
/// a thread of its own at the request's priority (the panel waits for it). The receiver hears
/// once the thread holds the diagnosis's slot, or is dropped when it gives up (a failure is
/// found again by the request).
pub(crate) fn start(
    state: &State,
    file: &Arc<GraphFile>,
    ahead: Ahead,
) -> Option<std::sync::mpsc::Receiver<()>> {
    let claim = state.diagnoses.claim(file, Key::File)?;
    let (started, heard) = std::sync::mpsc::channel();
    let cache = state.diagnoses.clone();
    let board = state.map_progress.clone();
    let gate = state.step_aside.clone();
    let file = file.clone();
    let work = move || {
        let began = std::time::Instant::now();
        // The opening answers travel first.
        gate.wait();
        match judge(&cache, &board, &file, &started) {
            // How long it took, from its start to its verdicts kept (`bench/prefetch_cost.py`
            // reads this line).
            Ok(()) => tracing::debug!(
                "diagnosis of {} ({ahead:?}) done in {:.1} ms",
                file.path.display(),
                began.elapsed().as_secs_f64() * 1e3
            ),
            Err(e) => tracing::debug!("diagnosing {} failed: {e}", file.path.display()),
        }
        drop(claim);
    };
    let spawned = match ahead {
        Ahead::Prefetch => state.background.spawn("graph-ascend-diagnosis", work),
        Ahead::Asked => std::thread::Builder::new()
            .name("graph-ascend-diagnosis".into())
            .spawn(work)
            .map(drop),
    };
    match spawned {
        Ok(()) => Some(heard),
        Err(e) => {
            tracing::debug!("cannot start a diagnosis thread: {e}");
            None
        }
    }
}

/// Who starts a file's diagnosis ([`start`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ahead {
    /// The page's opening of a compare file: nobody waits for it yet.
    Prefetch,
    /// The Diagnosis panel's request, which waits for it.
    Asked,
}

/// The file's diagnosis, kept in `cache`. A file of one step and one rank (most) is read once for
/// it and for the verdicts of that view, which are kept too (reading the rows is most of the
/// time): the verdicts' slot is held first, so that a request for them waits for these, and the
/// diagnosis is kept (and answered) before they are worked out.
fn judge(
    cache: &DiagnosisCache,
    board: &MapProgressBoard,
    file: &Arc<GraphFile>,
    started: &std::sync::mpsc::Sender<()>,
) -> Result<()> {
    let compare = open(file)?;
    let (steps, ranks) = (compare.steps(), compare.ranks());
    let (&[step], &[rank]) = (&steps[..], &ranks[..]) else {
        // Several graphs: the default divergence map from the same judgements, so that the Map
        // panel does not read every graph again beside this.
        let mut map = None;
        cache.get(file, Key::File, || {
            let _ = started.send(());
            let (d, fine) = diagnosis_with_default_map(board, file).map_err(failed)?;
            map = Some(fine);
            Ok::<_, HandlerError>(d)
        })?;
        if let Some(fine) = map {
            keep_default_map(cache, board, file, fine);
        }
        return Ok(());
    };
    cache.holding(
        file,
        Key::States { step, rank },
        || {
            let mut rows = None;
            let d = cache.get(file, Key::File, || {
                let _ = started.send(());
                let data = compare.load(step, rank).map_err(failed)?;
                // What `diagnose` does for a file of one step and rank, on the rows read here.
                let d = diagnose_step(
                    compare.mode(),
                    &Options::default(),
                    std::slice::from_ref(&data),
                );
                rows = Some(data);
                Ok::<_, HandlerError>(d)
            })?;
            Ok::<_, HandlerError>((d, rows))
        },
        |(d, rows)| {
            let data = rows.as_ref()?;
            Some(verdicts_of(
                &compare,
                data,
                d,
                step,
                rank,
                &Options::default(),
            ))
        },
    )?;
    Ok(())
}

impl Weight for Diagnosis {
    fn weight(&self) -> usize {
        let names = |v: &[String]| v.iter().map(|n| n.len() + 24).sum::<usize>();
        self.sources
            .iter()
            .map(|s| {
                512 + s.node.len()
                    + s.golden_node.len()
                    + 2 * s.reason.len()
                    + 64 * s.reason_parts.len()
                    + names(&s.enclosing)
            })
            .sum::<usize>()
            + 256 * (self.first_non_finite.len() + self.peer_inheritance.len())
    }
}

impl Weight for pb::DiagnosisStates {
    fn weight(&self) -> usize {
        self.source
            .iter()
            .chain(&self.inherited)
            .map(|n| n.len() + 24)
            .sum::<usize>()
            + self
                .sources_inside
                .iter()
                .map(|m| m.node.len() + 32)
                .sum::<usize>()
    }
}

/// A diagnosis' failure as the page's answer; a structure-only compare is no failure but a file
/// with nothing to diagnose, said plainly in the page's language.
pub(super) fn failed(err: graph_ascend_diagnose::DiagnoseError) -> HandlerError {
    match err {
        graph_ascend_diagnose::DiagnoseError::StructureOnly { .. } => {
            HandlerError::Invalid(Msg::StructureOnly)
        }
        err => HandlerError::Diagnosis(Msg::Diagnose, err),
    }
}

/// The file as a compare file (a clear error for any other file), read under a read pass of
/// the file (`crate::edit_gate`): no edit of the sidecar writes the file while it is open.
pub(super) fn open(file: &GraphFile) -> Result<Reading<CompareFile>> {
    let pass = file.read_pass();
    let compare = CompareFile::open(&file.path).map_err(failed)?;
    Ok(Reading {
        compare,
        _pass: pass,
    })
}

/// A compare file open under a read pass of it, released when it is closed.
pub(super) struct Reading<T> {
    compare: T,
    _pass: crate::edit_gate::ReadPass,
}

impl<T> std::ops::Deref for Reading<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.compare
    }
}

/// The verdicts of step `step`, rank `rank`: its sources (and the modules that are sources only
/// through them), and the matched nodes that differ beyond noise without being one.
fn states(
    state: &State,
    file: &Arc<GraphFile>,
    whole: &Arc<Diagnosis>,
    step: i64,
    rank: i64,
) -> Result<pb::DiagnosisStates> {
    // The sources of the shown step: the file's diagnosis judges every step.
    let of_step = if whole.steps_checked.iter().any(|c| c.step == step) {
        whole.clone()
    } else {
        state.diagnoses.get(file, Key::Step(step), || {
            let options = Options {
                step: Some(step),
                ..Options::default()
            };
            diagnose_file(&*open(file)?, &options).map_err(failed)
        })?
    };
    let verdicts = state.diagnoses.get(file, Key::States { step, rank }, || {
        verdicts(file, &of_step, step, rank)
    })?;
    Ok(pb::DiagnosisStates::clone(&verdicts))
}

fn verdicts(
    file: &GraphFile,
    of_step: &Diagnosis,
    step: i64,
    rank: i64,
) -> Result<pb::DiagnosisStates> {
    let compare = open(file)?;
    let data = compare.load(step, rank).map_err(failed)?;
    Ok(verdicts_of(
        &compare,
        &data,
        of_step,
        step,
        rank,
        &Options::default(),
    ))
}

fn verdicts_of(
    compare: &CompareFile,
    data: &RankData,
    of_step: &Diagnosis,
    step: i64,
    rank: i64,
    opts: &Options,
) -> pb::DiagnosisStates {
    let here = || {
        of_step
            .sources
            .iter()
            .filter(move |s| s.rank == rank && s.step == step)
    };
    let source: Vec<String> = here()
        .flat_map(|s| std::iter::once(&s.node).chain(&s.enclosing))
        .cloned()
        .collect();
    let inside = graph_ascend_diagnose::sources_inside(data, here().map(|s| s.node.as_str()));
    let sources_inside = data
        .npu
        .iter()
        .zip(inside)
        .filter(|(_, count)| *count > 0)
        .map(|(n, count)| pb::DiagnosisSourcesInside {
            node: n.name().to_string(),
            count: i32::try_from(count).unwrap_or(i32::MAX),
        })
        .collect();
    let is_source: HashSet<&str> = source.iter().map(String::as_str).collect();
    let differs = graph_ascend_diagnose::differing_nodes(compare.mode(), opts, data);
    let inherited = data
        .npu
        .iter()
        .zip(differs)
        .filter(|(n, differs)| *differs && !is_source.contains(n.name()))
        .map(|(n, _)| n.name().to_string())
        .collect();
    pb::DiagnosisStates {
        step: int(step),
        rank: int(rank),
        source,
        inherited,
        sources_inside,
    }
}

/// An i64 of the file as the API's int32 (steps and ranks are small; a huge one saturates).
pub(super) fn int(v: i64) -> i32 {
    i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX })
}

/// A serde unit variant's name (`Direction::Forward` → `"forward"`), as the CLI's JSON has it.
pub(super) fn label<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

/// A reason's clauses as the answer's messages.
fn reason_parts(parts: &[ReasonPart]) -> Vec<pb::DiagnosisReasonPart> {
    let text = |v: Option<&str>| v.unwrap_or_default().to_owned();
    parts
        .iter()
        .map(|p| {
            let v = p.values();
            pb::DiagnosisReasonPart {
                kind: p.kind().to_owned(),
                name: text(v.name),
                entry: text(v.entry),
                metric: v.metric.map(|m| label(&m)).unwrap_or_default(),
                err: v.err,
                target: text(v.target),
                golden: text(v.golden),
                score: v.score,
            }
        })
        .collect()
}

/// The answer's message: the diagnosis with its first `top` sources.
fn message(d: &Diagnosis, top: usize) -> pb::Diagnosis {
    pb::Diagnosis {
        mode: label(&d.mode),
        step: int(d.step),
        ranks: d.ranks.iter().copied().map(int).collect(),
        steps_checked: d
            .steps_checked
            .iter()
            .map(|c| pb::DiagnosisStepCheck {
                step: int(c.step),
                forward_differs: c.forward_differs,
                any_differs: c.any_differs,
            })
            .collect(),
        origin_rank: d.origin_rank.map(int),
        first_non_finite: d
            .first_non_finite
            .iter()
            .map(|n| pb::DiagnosisNonFinite {
                step: int(n.step),
                rank: int(n.rank),
                node: n.node.clone(),
                direction: label(&n.direction),
                matched: n.matched,
                reason: n.reason.clone(),
                reason_parts: reason_parts(&n.reason_parts),
            })
            .collect(),
        sources: d
            .sources
            .iter()
            .take(top)
            .map(|s| pb::DiagnosisSource {
                step: int(s.step),
                rank: int(s.rank),
                node: s.node.clone(),
                golden_node: s.golden_node.clone(),
                direction: label(&s.direction),
                kind: label(&s.kind),
                score: s.score,
                reason: s.reason.clone(),
                enclosing: s.enclosing.clone(),
                reason_parts: reason_parts(&s.reason_parts),
            })
            .collect(),
        total_sources: i32::try_from(d.sources.len()).unwrap_or(i32::MAX),
        peer_inheritance: d
            .peer_inheritance
            .iter()
            .map(|p| pb::DiagnosisPeer {
                step: int(p.step),
                rank: int(p.rank),
                node: p.node.clone(),
                from_rank: int(p.from_rank),
                from_node: p.from_node.clone(),
            })
            .collect(),
        nodes_judged: i32::try_from(d.nodes_judged).unwrap_or(i32::MAX),
        groups: d.groups.iter().take(top).map(group).collect(),
        total_groups: i32::try_from(d.groups.len()).unwrap_or(i32::MAX),
        tolerances: Some(tolerances(d)),
    }
}

/// Which tolerances `d` used.
fn tolerances(d: &Diagnosis) -> pb::DiagnosisTolerances {
    let Some(t) = &d.tolerances else {
        return pb::DiagnosisTolerances {
            source: "table".into(),
            ..Default::default()
        };
    };
    let (source, reference) = match &t.from {
        LearnedFrom::Tightened => ("tightened", String::new()),
        LearnedFrom::Reference { file } => (
            "reference",
            file.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        ),
    };
    pb::DiagnosisTolerances {
        source: source.into(),
        reference,
        kinds: t
            .kinds
            .iter()
            .map(|k| pb::DiagnosisTolerance {
                op: k.op.clone(),
                direction: label(&k.direction),
                dtype: label(&k.dtype),
                samples: i32::try_from(k.samples).unwrap_or(i32::MAX),
                noise: k.output_noise,
                jump: k.output.jump,
            })
            .collect(),
    }
}

/// One fault of the answer.
fn group(g: &graph_ascend_diagnose::SourceGroup) -> pb::DiagnosisGroup {
    let flat = |spans: &[(i64, i64)]| -> Vec<i32> {
        spans.iter().flat_map(|&(a, b)| [int(a), int(b)]).collect()
    };
    pb::DiagnosisGroup {
        summary: g.summary.clone(),
        kind: label(&g.kind),
        module: g.site.module.clone(),
        api: g.site.api.clone(),
        call: i32::try_from(g.site.call).unwrap_or(i32::MAX),
        direction: label(&g.site.direction),
        step: int(g.first.step),
        rank: int(g.first.rank),
        micro_step: int(g.first.micro_step),
        node: g.first.node.clone(),
        reason: g.reason.clone(),
        reason_parts: reason_parts(&g.reason_parts),
        occurrences: i32::try_from(g.occurrences).unwrap_or(i32::MAX),
        micro_steps: g.micro_steps.iter().copied().map(int).collect(),
        ranks: flat(&g.ranks),
        steps: flat(&g.steps),
        others: g
            .others
            .iter()
            .map(|o| pb::DiagnosisOccurrence {
                step: int(o.step),
                rank: int(o.rank),
                micro_step: int(o.micro_step),
                node: o.node.clone(),
            })
            .collect(),
    }
}

/// `exportCsv`: the compare as CSV (`graph_ascend_diagnose::export`), sent to `send` in chunks:
/// first one saying success (or the error), the content type and the file name, then the bytes.
/// `send` answers false when the receiver is gone, which stops the export.
///
/// The CSV is written whole to an unnamed temporary file first (it goes when the export ends,
/// even when the sidecar is killed), and sent only once complete: a bad row anywhere in the file
/// makes the first chunk the error, which the page shows, naming the file and the row, instead of
/// a download cut short after its headers went out.
pub fn export_csv(
    state: &State,
    req: pb::ExportCsvRequest,
    send: &mut dyn FnMut(pb::FileChunk) -> bool,
) {
    let lang = Lang::parse(&req.lang);
    let spooled = csv_source(state, &req).and_then(|(compare, file_name)| {
        let spool = spool_csv(&compare, req.step.map(i64::from), req.rank.map(i64::from))?;
        Ok((spool, file_name))
    });
    let (mut spool, file_name) = match spooled {
        Ok(spooled) => spooled,
        Err(e) => {
            send(pb::FileChunk::failure(e.text(lang)));
            return;
        }
    };
    let header = pb::FileChunk {
        success: true,
        error: None,
        content_type: CSV_CONTENT_TYPE.to_owned(),
        file_name,
        data: Vec::new(),
    };
    if !send(header) {
        return;
    }
    loop {
        let mut data = Vec::with_capacity(CHUNK_BYTES);
        let read = (&mut spool).take(CHUNK_BYTES as u64).read_to_end(&mut data);
        match read {
            Ok(0) => return,
            Ok(_) => {
                let chunk = pb::FileChunk {
                    success: true,
                    data,
                    ..Default::default()
                };
                if !send(chunk) {
                    return;
                }
            }
            Err(source) => {
                // The temporary file could not be read back: the download ends with an error
                // (the shim aborts the HTTP answer: docs/shim.md, "Downloads").
                let e = graph_ascend_diagnose::DiagnoseError::Write {
                    what: "the CSV's temporary file".into(),
                    source,
                };
                send(pb::FileChunk::failure(failed(e).text(lang)));
                return;
            }
        }
    }
}

/// The whole CSV of `compare`, written to an unnamed temporary file and rewound.
fn spool_csv(compare: &CompareFile, step: Option<i64>, rank: Option<i64>) -> Result<std::fs::File> {
    let write_err = |source| {
        failed(graph_ascend_diagnose::DiagnoseError::Write {
            what: "the CSV's temporary file".into(),
            source,
        })
    };
    let mut spool = tempfile::tempfile().map_err(write_err)?;
    {
        let mut out = std::io::BufWriter::with_capacity(CHUNK_BYTES, &mut spool);
        graph_ascend_diagnose::export::write_csv(compare, step, rank, &mut out).map_err(failed)?;
        out.flush().map_err(write_err)?;
    }
    spool.seek(std::io::SeekFrom::Start(0)).map_err(write_err)?;
    Ok(spool)
}

/// The compare file of an export request, checked against its steps and ranks, and the name
/// the download gets: `<tag>.csv`, or `<tag>_step<s>_rank<r>.csv` for one step and rank.
fn csv_source(state: &State, req: &pb::ExportCsvRequest) -> Result<(Reading<CompareFile>, String)> {
    let file = file_of(state, &req.run, &req.tag, &req.r#type)?;
    let compare = open(&file)?;
    let (step, rank) = (req.step.map(i64::from), req.rank.map(i64::from));
    compare.check_selection(step, rank).map_err(failed)?;
    let mut name = req.tag.clone();
    if let Some(s) = step {
        name.push_str(&format!("_step{s}"));
    }
    if let Some(r) = rank {
        name.push_str(&format!("_rank{r}"));
    }
    name.push_str(".csv");
    Ok((compare, name))
}
