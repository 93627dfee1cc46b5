//! The self-contained report's data: the answers the page asks for, worked out in advance.
//!
//! The page lays nothing out itself (the sidecar does), so a report that opens without a server
//! carries its expansions laid out in advance, for each step and rank it holds (a *point*): the
//! first source's first, then those of the other sources and faults, then the steps and ranks
//! that follow it (`point_order`). Each point holds its root view, every path to a source of it
//! (each module on it opened, the source's own insides when it is a module), on both sides, and
//! its verdicts; the point the report opens on also each module of its root view opened (the top
//! levels). The page's static data source
//! (`frontend/src/report/`) answers the page's requests from them; an expansion that was not laid
//! out answers that it is left out of the report. The answers are the handlers' own (the same
//! layout, details and diagnosis as the sidecar's), split so that what is common to several views
//! is held once: each node's fixed fields once per side, each view as its expanded modules and its
//! boxes' positions. Everything is bounded by a byte budget, spent in order of importance (the
//! root views, the sources' paths in the diagnosis's order, then the top levels); what did not fit
//! is named in the report (`leftOut`). Strings from the file stay data: the HTML page embeds this
//! JSON escaped (`report_page`).

use std::collections::{BTreeSet, HashMap, HashSet};

use graph_ascend_proto as pb;
use serde_json::{json, Map, Value};

use super::catalog::config_info;
use super::diagnosis::diagnose;
use super::navigation::{get_node_info, views_in_turn, views_of_each, EachView};
use super::reply::{Failure, HandlerError, Result};
use crate::messages::{Lang, Msg};
use crate::report_page::{page_assets, report_html};
use crate::state::State;

/// The client id of the report's own views in the sidecar's view state.
const REPORT_CLIENT: &str = "graph-ascend-report";

/// msprobe's node type of an API call (a box that does not open).
const API_NODE: i32 = 1;

/// Below this many bytes left, no view is laid out any more (none would fit).
const MIN_VIEW_BYTES: usize = 256;

/// Below this many bytes left, no node's details are read any more (none would fit: each holds
/// its id twice, and its inputs, outputs and stack).
const MIN_DETAIL_BYTES: usize = 64;

/// The diagnosis answer's length (the Diagnosis panel's own `top`).
const DIAGNOSIS_TOP: i32 = 200;

/// At most this many boxes laid out in all, over every view of a report (the work bound: each
/// view is laid out whole, so a view of a level of `n` boxes costs about `n`). The 48-layer
/// pair's report stays under it (1,578 views of about a thousand boxes); a level of 44k boxes
/// gets a few hundred views, then the rest are named as left out instead of running for hours.
const MAX_LAID_OUT_BOXES: usize = 12_000_000;

/// The widest root level a report holds: wider, its views would take minutes and gigabytes
/// (each a layout of the whole level, each box's fields held), so it is refused and said.
const MAX_ROOT_BOXES: usize = 50_000;

/// What a report tells while it is made: `(what, done, total)`.
pub type ReportProgress<'a> = &'a dyn Fn(&str, usize, usize);

/// What to put in a report.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// The step and rank shown (default: the diagnosis's step and the rank of its first source,
    /// else the file's first).
    pub step: Option<i32>,
    pub rank: Option<i32>,
    /// Leave out stacks and paths (they can name private folders).
    pub no_paths: bool,
    /// About how many bytes the data may take (the page's assets come on top).
    pub max_bytes: usize,
    /// What the provenance says the file is (its path, or only its name).
    pub source: String,
    /// The tool and version that made it, and when (UTC, RFC 3339).
    pub tool: String,
    pub created: String,
}

/// The default data budget: the 48-layer pair's report stays under 10 MB with the page.
pub const DEFAULT_REPORT_BYTES: usize = 8 << 20;

/// A report's data, as JSON, and what it holds.
#[derive(Debug)]
pub struct ReportData {
    pub json: Value,
    /// Views laid out, nodes with details, and what was left out (also in `json`).
    pub views: usize,
    pub details: usize,
    pub left_out: Vec<String>,
}

/// One pane of the report: its nodes' fixed fields, its laid-out views, its nodes' details.
#[derive(Default)]
struct Pane {
    keys: Vec<String>,
    index: HashMap<String, usize>,
    nodes: Vec<Value>,
    /// Each node's parent (its `parentNode`), for the paths.
    parents: HashMap<String, String>,
    /// Modules (boxes that can be opened).
    modules: HashSet<String>,
    views: Vec<Value>,
    /// The first view (the root view): the others are written as runs of its boxes, moved.
    base: Option<Base>,
    view_keys: HashSet<Vec<String>>,
    details: Map<String, Value>,
    /// The root view's boxes: what each layout of this pane costs at least.
    root_boxes: usize,
}

impl Pane {
    /// The modules of the root view (the top levels).
    fn top_modules(&self) -> Vec<String> {
        self.views
            .first()
            .map(|v| view_keys(self, v))
            .unwrap_or_default()
            .into_iter()
            .filter(|k| self.modules.contains(k) && self.parents.contains_key(k))
            .collect()
    }
}

/// Why views were not laid out: the widest root view, and the work bound.
fn too_wide(panes: &HashMap<&str, Pane>) -> String {
    let widest = panes.values().map(|p| p.root_boxes).max().unwrap_or(0);
    format!(
        "each view of this file lays out its root level of up to {widest} boxes, and a report lays out at most {MAX_LAID_OUT_BOXES} boxes in all (about {} views of it); open the file in the page (graph-ascend serve) to expand the rest",
        MAX_LAID_OUT_BOXES / widest.max(1)
    )
}

/// Bytes as whole MB, rounded up.
fn mb_up(bytes: usize) -> usize {
    bytes.div_ceil(1 << 20)
}

/// Whether a path's views are in the report.
enum Kept {
    Yes,
    /// One did not fit the size bound.
    NoRoom,
    /// Not laid out: the work bound was spent.
    NotLaidOut,
}

/// The bytes a JSON value takes (as serialized).
fn size_of(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

/// Builds the report's data for `run`/`tag` of the sidecar's catalog.
pub fn report_data(
    state: &State,
    run: &str,
    tag: &str,
    opts: &ReportOptions,
) -> Result<ReportData> {
    report_data_with_progress(state, run, tag, opts, &|_, _, _| {})
}

/// [`report_data`], telling `progress` what it is doing: the diagnosis, then each step and
/// rank's views (paths to sources and top levels done of all), then their details.
pub fn report_data_with_progress(
    state: &State,
    run: &str,
    tag: &str,
    opts: &ReportOptions,
    progress: ReportProgress<'_>,
) -> Result<ReportData> {
    let lang = "en";
    let meta_of = |step: i32, rank: i32| pb::MetaData {
        run: run.to_owned(),
        tag: tag.to_owned(),
        r#type: "db".into(),
        lang: lang.into(),
        micro_step: Some(-1),
        step: Some(step),
        rank: Some(rank),
    };
    let config = config_info(state, Some(&meta_of(0, 0)))?;
    let info = config
        .data
        .clone()
        .ok_or(HandlerError::Invalid(Msg::LoadConfig))?;
    let compare = !info.is_single_graph;
    let file_steps: Vec<i32> = if info.steps.is_empty() {
        vec![0]
    } else {
        info.steps.clone()
    };
    let file_ranks: Vec<i32> = if info.ranks.is_empty() {
        vec![0]
    } else {
        info.ranks.clone()
    };
    // A step or rank asked for that the file does not hold is refused before any work, naming it.
    let held = |step: i32, rank: i32| {
        for (what, value, known) in [("step", step, &file_steps), ("rank", rank, &file_ranks)] {
            if !known.contains(&value) {
                let reason = format!(
                    "{tag}.vis.db holds no {what} {value} (its {what}s: {})",
                    super::selection::listed(known)
                );
                return Err(HandlerError::Because(Msg::MetaData, reason));
            }
        }
        Ok(())
    };
    held(
        opts.step.unwrap_or(file_steps[0]),
        opts.rank.unwrap_or(file_ranks[0]),
    )?;
    // The diagnosis first (of the file: its sources are every step's and rank's): it chooses the
    // view when none is asked for.
    let diagnosis_of = |step: i32, rank: i32| {
        diagnose(
            state,
            pb::DiagnoseRequest {
                run: run.to_owned(),
                tag: tag.to_owned(),
                r#type: "db".into(),
                lang: lang.into(),
                micro_step: Some(-1),
                step: Some(step),
                rank: Some(rank),
                top: DIAGNOSIS_TOP,
                states: true,
                client_id: REPORT_CLIENT.into(),
                // The report's diagnosis is the page's default one: tolerances from the file.
                reference_run: String::new(),
                reference_tag: String::new(),
            },
        )
    };
    let first = (file_steps[0], file_ranks[0]);
    progress("diagnosis", 0, 1);
    let diagnosis = compare.then(|| diagnosis_of(first.0, first.1));
    let found = diagnosis.as_ref().and_then(|d| d.data.as_ref());
    // The first source's step and rank (a source's own, not the diagnosis's step alone: a fault
    // on rank 1 opens on rank 1).
    let suggested = found.map(|d| {
        d.sources
            .first()
            .map_or((d.step, first.1), |s| (s.step, s.rank))
    });
    let step = opts.step.or(suggested.map(|s| s.0)).unwrap_or(first.0);
    let rank = opts.rank.or(suggested.map(|s| s.1)).unwrap_or(first.1);
    held(step, rank)?;
    let order = point_order(found, (step, rank), &file_steps, &file_ranks);
    let mut budget = Budget {
        left: opts.max_bytes,
        boxes_left: MAX_LAID_OUT_BOXES,
        wanted: 0,
        left_out: Vec::new(),
    };

    // The configuration as the report has it: the steps and ranks it holds (set at the end), all
    // micro steps.
    let mut config_json = answer_json(&config);
    // The diagnosis's list once (the file's: the same at every step and rank); each point its
    // own verdicts.
    let mut diagnosis_json = diagnosis.as_ref().map(answer_json);
    if let Some(obj) = diagnosis_json.as_mut().and_then(Value::as_object_mut) {
        obj.remove("states");
    }
    // Bounded by the answer's length (`DIAGNOSIS_TOP`); counted first.
    budget.left = budget
        .left
        .saturating_sub(size_of(&config_json) + diagnosis_json.as_ref().map_or(0, size_of) + 64);

    let sides: &[&str] = if compare {
        &["NPU", "Bench"]
    } else {
        &["Single"]
    };
    let mut points: Vec<Value> = Vec::new();
    let mut held: Vec<(i32, i32)> = Vec::new();
    let mut not_held: Vec<(i32, i32)> = Vec::new();
    let mut views = 0usize;
    let mut details = 0usize;
    let others = order.len().saturating_sub(1);
    for (k, &(pstep, prank)) in order.iter().enumerate() {
        let at = Point {
            meta: meta_of(pstep, prank),
            diagnosis: found,
            sides,
            progress,
        };
        // The first point (the one the report opens on) gets the top levels, and all it needs
        // but a third of what is left when others follow; each other point its root views and
        // its sources' paths, then the details of what it shows.
        let laid = if k == 0 {
            let reserve = if others > 0 { budget.left / 3 } else { 0 };
            budget.left -= reserve;
            let laid = at.lay_out(state, opts, &mut budget, true)?;
            budget.left += reserve;
            laid
        } else if budget.left < MIN_VIEW_BYTES * sides.len() {
            None
        } else {
            // On a trial budget: a point whose root views do not fit takes nothing.
            let mut trial = Budget {
                left: budget.left,
                boxes_left: budget.boxes_left,
                wanted: 0,
                left_out: Vec::new(),
            };
            let laid = at.lay_out(state, opts, &mut trial, false)?;
            if laid.is_some() {
                budget.left = trial.left;
            }
            // The layouts were made either way.
            budget.boxes_left = trial.boxes_left;
            laid
        };
        let Some(mut laid) = laid else {
            not_held.push((pstep, prank));
            continue;
        };
        budget.left_out.append(&mut laid.left_out);
        views += laid.views;
        details += laid.details;
        let states = if compare {
            let answer = if k == 0 && (pstep, prank) == first {
                diagnosis.as_ref().map(answer_json)
            } else {
                Some(answer_json(&diagnosis_of(pstep, prank)))
            };
            answer
                .and_then(|mut a| a.get_mut("states").map(Value::take))
                .unwrap_or(Value::Null)
        } else {
            Value::Null
        };
        let size = size_of(&states);
        budget.left = budget.left.saturating_sub(size);
        held.push((pstep, prank));
        points.push(json!({ "step": pstep, "rank": prank, "states": states, "panes": laid.panes }));
    }
    // The points of the file not held, by name.
    let all_points: Vec<(i32, i32)> = file_steps
        .iter()
        .flat_map(|&s| file_ranks.iter().map(move |&r| (s, r)))
        .collect();
    let rest: Vec<(i32, i32)> = all_points
        .iter()
        .copied()
        .filter(|p| !held.contains(p))
        .collect();
    let rest_text = points_text(&rest);
    if !not_held.is_empty() {
        budget.left_out.push(format!(
            "{} of the steps and ranks holding sources or following them did not fit the report's size bound: {}",
            not_held.len(),
            points_text(&not_held)
        ));
    }
    if !rest.is_empty() {
        budget.left_out.push(format!(
            "the other steps and ranks of the file: {rest_text}"
        ));
    }
    if opts.no_paths {
        budget
            .left_out
            .push("stacks and paths (left out on request)".into());
    }
    budget.left_out.push(
        "micro steps one by one; expansions other than the top levels (of the step and rank the report opens on) and the paths to sources; matching, filters, conversions and the divergence map"
            .into(),
    );
    let held_steps: BTreeSet<i32> = held.iter().map(|p| p.0).collect();
    let held_ranks: BTreeSet<i32> = held.iter().map(|p| p.1).collect();
    if let Some(data) = config_json.get_mut("data").and_then(Value::as_object_mut) {
        data.insert("steps".into(), json!(held_steps));
        data.insert("ranks".into(), json!(held_ranks));
        data.insert("microSteps".into(), json!(0));
    }
    let held_json: Vec<Value> = held
        .iter()
        .map(|(s, r)| json!({"step": s, "rank": r}))
        .collect();
    // Where the report opens: on the first source, its panel open, its colours on.
    let start_node = found
        .and_then(|d| {
            d.sources
                .iter()
                .find(|s| (s.step, s.rank) == (step, rank))
                .map(|s| s.node.clone())
        })
        .unwrap_or_default();
    let left_out = budget.left_out;
    let json = json!({
        "format": 2,
        "provenance": {
            "file": opts.source,
            "steps": file_steps,
            "ranks": file_ranks,
            "step": step,
            "rank": rank,
            "held": held_json,
            "notHeld": rest_text,
            "tool": opts.tool,
            "created": opts.created,
            "noPaths": opts.no_paths,
        },
        "meta": { "run": run, "tag": tag, "step": step, "rank": rank },
        "start": { "step": step, "rank": rank, "node": start_node },
        "catalog": { "data": { run: { "type": "db", "tags": [tag] } }, "error": [] },
        "config": config_json,
        "diagnosis": diagnosis_json,
        "points": points,
        "leftOut": left_out,
    });
    Ok(ReportData {
        json,
        views,
        details,
        left_out,
    })
}

/// At most this many points beyond those holding sources and faults (steps and ranks that follow
/// a source, which can inherit its error): a report of 64 ranks × 4 steps is not 256 layouts.
const MAX_FOLLOWING_POINTS: usize = 16;

/// The steps and ranks a report holds, in order: the one it opens on; those of the sources, the
/// faults' other occurrences and the first inf/NaN (the diagnosis's order); the ranks that
/// received the error from a peer; then the steps and ranks that follow the first source (its
/// step's other ranks, then later steps, nearest first), which can inherit from it. Earlier
/// steps come before the error and are left out (listed by name).
fn point_order(
    found: Option<&pb::Diagnosis>,
    start: (i32, i32),
    steps: &[i32],
    ranks: &[i32],
) -> Vec<(i32, i32)> {
    let mut out = vec![start];
    let valid = |p: &(i32, i32)| steps.contains(&p.0) && ranks.contains(&p.1);
    let push = |out: &mut Vec<(i32, i32)>, p: (i32, i32)| {
        if valid(&p) && !out.contains(&p) {
            out.push(p);
        }
    };
    if let Some(d) = found {
        for s in &d.sources {
            push(&mut out, (s.step, s.rank));
        }
        for g in &d.groups {
            push(&mut out, (g.step, g.rank));
            for o in &g.others {
                push(&mut out, (o.step, o.rank));
            }
        }
        for nf in &d.first_non_finite {
            push(&mut out, (nf.step, nf.rank));
        }
        for p in &d.peer_inheritance {
            push(&mut out, (p.step, p.rank));
        }
    }
    let faulted = out.len();
    let mut following: Vec<(i32, i32)> = steps
        .iter()
        .flat_map(|&s| ranks.iter().map(move |&r| (s, r)))
        .filter(|&(s, _)| s >= start.0)
        .collect();
    following.sort_by_key(|&(s, r)| (s - start.0, i32::from(r != start.1), r));
    for p in following {
        if out.len() >= faulted + MAX_FOLLOWING_POINTS {
            break;
        }
        push(&mut out, p);
    }
    out
}

/// Steps and ranks by name, each step's ranks as ranges: "step 0: ranks 0–3, 7; step 1: rank 2".
fn points_text(points: &[(i32, i32)]) -> String {
    let mut by_step: std::collections::BTreeMap<i32, BTreeSet<i32>> = Default::default();
    for &(s, r) in points {
        by_step.entry(s).or_default().insert(r);
    }
    by_step
        .iter()
        .map(|(s, ranks)| {
            let mut spans: Vec<(i32, i32)> = Vec::new();
            for &r in ranks {
                match spans.last_mut() {
                    Some(last) if last.1 + 1 == r => last.1 = r,
                    _ => spans.push((r, r)),
                }
            }
            let text: Vec<String> = spans
                .iter()
                .map(|&(a, b)| {
                    if a == b {
                        a.to_string()
                    } else {
                        format!("{a}–{b}")
                    }
                })
                .collect();
            let word = if ranks.len() == 1 { "rank" } else { "ranks" };
            format!("step {s}: {word} {}", text.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// One step and rank to lay out.
struct Point<'a> {
    meta: pb::MetaData,
    diagnosis: Option<&'a pb::Diagnosis>,
    sides: &'a [&'a str],
    progress: ReportProgress<'a>,
}

/// A step and rank laid out: its panes as JSON, what it holds and what did not fit.
struct LaidOut {
    panes: Value,
    views: usize,
    details: usize,
    left_out: Vec<String>,
}

impl Point<'_> {
    /// The root views, every path to a source of this step and rank, the top levels (`top`),
    /// then the details of every node shown. None when a root view does not fit.
    fn lay_out(
        &self,
        state: &State,
        opts: &ReportOptions,
        budget: &mut Budget,
        top: bool,
    ) -> Result<Option<LaidOut>> {
        let meta = &self.meta;
        let (step, rank) = (meta.step.unwrap_or(0), meta.rank.unwrap_or(0));
        let sides = self.sides;
        let mut panes: HashMap<&str, Pane> = HashMap::new();
        // The bytes the root views that did not fit would take, over the sides.
        let mut roots_wanted = 0usize;
        // 1. The root views.
        for &side in sides {
            let side = side_name(side);
            let mut pane = Pane::default();
            if !lay_out(state, meta, side, &mut pane, &[], budget)? {
                if !top {
                    return Ok(None);
                }
                if pane.root_boxes > MAX_ROOT_BOXES {
                    budget.left_out.push(format!(
                        "the {side} graph's views: its root level has {} boxes; the report holds levels of up to {MAX_ROOT_BOXES} boxes (wider ones take minutes and gigabytes to lay out), so it holds the diagnosis without views. Open the file in the page (graph-ascend serve), which lays out what is shown",
                        pane.root_boxes
                    ));
                    panes.insert(side, pane);
                    continue;
                }
                // No view of this side fits then (each holds the root view's boxes, written
                // whole without it): said with what it would take.
                roots_wanted += budget.wanted;
                budget.left_out.push(format!(
                    "the {side} graph's root view did not fit the report's size bound: it has {} boxes and needs about {} MB of the {} MB left (--max-mb {}); its paths and top levels are left out with it. Give --max-mb {} or more to hold the root views, or open the file in the page (graph-ascend serve)",
                    pane.root_boxes,
                    mb_up(budget.wanted),
                    budget.left >> 20,
                    opts.max_bytes >> 20,
                    mb_up(opts.max_bytes.saturating_sub(budget.left) + roots_wanted) + 2,
                ));
            }
            panes.insert(side, pane);
        }
        // 2. Every path to a source of this step and rank, the diagnosis's order.
        let mut targets: Vec<(&'static str, String)> = Vec::new();
        if let Some(d) = self.diagnosis {
            let here = |s: i32, r: i32| s == step && r == rank;
            for src in d.sources.iter().filter(|s| here(s.step, s.rank)) {
                targets.push(("NPU", src.node.clone()));
                if !src.golden_node.is_empty() {
                    targets.push(("Bench", src.golden_node.clone()));
                }
            }
            for g in d.groups.iter().filter(|g| here(g.step, g.rank)) {
                targets.push(("NPU", g.node.clone()));
            }
            for g in &d.groups {
                for o in g.others.iter().filter(|o| here(o.step, o.rank)) {
                    targets.push(("NPU", o.node.clone()));
                }
            }
            for nf in d.first_non_finite.iter().filter(|n| here(n.step, n.rank)) {
                targets.push(("NPU", nf.node.clone()));
            }
        }
        let mut seen_targets = HashSet::new();
        targets.retain(|t| seen_targets.insert(t.clone()));
        let mut sources_left_out = 0usize;
        let mut sources_not_laid_out = 0usize;
        let at = format!("step {step}, rank {rank}");
        let what = format!("views of {at}");
        let top_total: usize = if top {
            panes.values().map(|p| p.top_modules().len()).sum()
        } else {
            0
        };
        let work = targets.len() + top_total;
        for (k, (side, node)) in targets.iter().enumerate() {
            (self.progress)(&what, k, work);
            let Some(pane) = panes.get_mut(side) else {
                continue;
            };
            if pane.base.is_none() {
                if pane.root_boxes > MAX_ROOT_BOXES {
                    sources_not_laid_out += 1;
                } else {
                    sources_left_out += 1;
                }
                continue;
            }
            match path_to(state, meta, side, pane, node, budget)? {
                Kept::Yes => {}
                Kept::NoRoom => sources_left_out += 1,
                Kept::NotLaidOut => sources_not_laid_out += 1,
            }
        }
        if sources_left_out > 0 {
            budget.left_out.push(format!(
                "{sources_left_out} of the {} paths to sources ({at}) did not fit the report's size bound",
                targets.len()
            ));
        }
        if sources_not_laid_out > 0 {
            budget.left_out.push(format!(
                "{sources_not_laid_out} of the {} paths to sources ({at}) were not laid out: {}",
                targets.len(),
                too_wide(&panes)
            ));
        }
        // 3. The top levels: each module of the root view opened, on at most half of what is
        // left (the details come after them).
        if top {
            let reserve = budget.left / 2;
            budget.left -= reserve;
            let mut top_left_out = 0usize;
            let mut top_not_laid_out = 0usize;
            let mut done = targets.len();
            for &side in sides {
                let Some(pane) = panes.get_mut(side) else {
                    continue;
                };
                let mut modules = pane.top_modules();
                // Each opened costs a layout of the root view and the module's children: as
                // many as the work bound allows, the rest named.
                let each = pane.root_boxes.max(1);
                let affordable = budget.boxes_left / each;
                if modules.len() > affordable {
                    top_not_laid_out += modules.len() - affordable;
                    modules.truncate(affordable);
                }
                budget.boxes_left -= modules.len() * each;
                let names: Vec<&str> = modules.iter().map(String::as_str).collect();
                let progress = self.progress;
                // One copy of the root view: each module opened, kept, closed again.
                views_of_each(state, Some(meta), side, &names, &mut |i, open| {
                    if i % 64 == 0 {
                        progress(&what, done + i, work);
                    }
                    if pane.view_keys.contains(&vec![modules[i].clone()]) {
                        return;
                    }
                    if budget.left < MIN_VIEW_BYTES || !keep_view(pane, open(), budget) {
                        top_left_out += 1;
                    }
                })
                .map_err(|_| HandlerError::Invalid(Msg::ExpandNode))?;
                done += modules.len();
            }
            if top_left_out > 0 {
                budget.left_out.push(format!(
                    "{top_left_out} of the {top_total} top-level modules could not be opened in the report (size bound)"
                ));
            }
            if top_not_laid_out > 0 {
                budget.left_out.push(format!(
                    "{top_not_laid_out} of the {top_total} top-level modules were not opened: {}",
                    too_wide(&panes)
                ));
            }
            budget.left += reserve;
        }
        // 4. The details of every node shown (and of its match), while the budget lasts.
        let mut details = 0usize;
        let mut details_left_out = 0usize;
        for &side in sides {
            let side: &'static str = side_name(side);
            let keys: Vec<String> = panes.get(side).map(|p| p.keys.clone()).unwrap_or_default();
            let what = format!("details of {at}, {side}");
            for (k, key) in keys.iter().enumerate() {
                if k % 256 == 0 {
                    (self.progress)(&what, k, keys.len());
                }
                let key = key.clone();
                let have = panes
                    .get(side)
                    .is_some_and(|p| p.details.contains_key(&key));
                if have {
                    continue;
                }
                // No room for any detail: the rest are counted, not read.
                if budget.left < MIN_DETAIL_BYTES {
                    details_left_out += 1;
                    continue;
                }
                let answer = get_node_info(state, node_request(meta, side, &key));
                let mut answer = answer_json(&answer);
                // `{"npu": {...}|null, "bench": {...}|null}`: each side's details kept once.
                let Some(entries) = answer.get_mut("data").and_then(Value::as_object_mut) else {
                    continue;
                };
                let mut found = Vec::new();
                for (entry_side, detail) in entries.iter_mut() {
                    let which = match entry_side.as_str() {
                        "npu" if side == "Single" => "Single",
                        "npu" => "NPU",
                        "bench" => "Bench",
                        _ => continue,
                    };
                    let detail = detail.take();
                    let Some(id) = detail.get("id").and_then(Value::as_str).map(str::to_owned)
                    else {
                        continue;
                    };
                    found.push((which, id, detail));
                }
                for (which, id, mut detail) in found {
                    if opts.no_paths {
                        strip_paths(&mut detail);
                    }
                    let Some(pane) = panes.get_mut(which) else {
                        continue;
                    };
                    if pane.details.contains_key(&id) {
                        continue;
                    }
                    if !budget.spend(size_of(&detail) + id.len() + 4) {
                        details_left_out += 1;
                        continue;
                    }
                    pane.details.insert(id, detail);
                    details += 1;
                }
            }
        }
        if details_left_out > 0 {
            budget.left_out.push(format!(
                "the details of {details_left_out} nodes ({at}) did not fit the report's size bound"
            ));
        }
        let views: usize = panes.values().map(|p| p.views.len()).sum();
        let mut panes_json = Map::new();
        for &side in sides {
            if let Some(p) = panes.remove(side) {
                panes_json.insert(
                    side.into(),
                    json!({
                        "keys": p.keys,
                        "nodes": p.nodes,
                        "views": p.views,
                        "details": p.details,
                    }),
                );
            }
        }
        Ok(Some(LaidOut {
            panes: Value::Object(panes_json),
            views,
            details,
            left_out: std::mem::take(&mut budget.left_out),
        }))
    }
}

fn side_name(side: &str) -> &'static str {
    match side {
        "NPU" => "NPU",
        "Bench" => "Bench",
        _ => "Single",
    }
}

/// Stacks (which name source files) out of a node's details.
fn strip_paths(detail: &mut Value) {
    if let Some(obj) = detail.as_object_mut() {
        if obj.contains_key("stack_info") {
            obj.insert("stack_info".into(), json!([]));
        }
    }
}

struct Budget {
    left: usize,
    /// Boxes that may still be laid out (`MAX_LAID_OUT_BOXES` in all).
    boxes_left: usize,
    /// The bytes of the last view that did not fit.
    wanted: usize,
    left_out: Vec<String>,
}

impl Budget {
    /// Takes `bytes` if they are left.
    fn spend(&mut self, bytes: usize) -> bool {
        if bytes > self.left {
            return false;
        }
        self.left -= bytes;
        true
    }
}

/// An answer as the page receives it, parsed.
fn answer_json<T: graph_ascend_proto::json::Fields + prost::Message>(answer: &T) -> Value {
    serde_json::from_slice(&graph_ascend_proto::json::to_vec(answer)).unwrap_or(Value::Null)
}

/// The names a view shows.
fn view_keys(pane: &Pane, view: &Value) -> Vec<String> {
    view.get("boxes")
        .and_then(Value::as_array)
        .map(|boxes| {
            boxes
                .iter()
                .filter_map(|b| b.get(0).and_then(Value::as_u64))
                .filter_map(|i| pane.keys.get(i as usize).cloned())
                .collect()
        })
        .unwrap_or_default()
}

/// A request about one node of a side, from the report's own client.
fn node_request(meta: &pb::MetaData, side: &str, name: &str) -> pb::NodeRequest {
    pb::NodeRequest {
        node_info: Some(pb::NodeRef {
            node_name: name.into(),
            node_type: side.into(),
        }),
        meta_data: Some(meta.clone()),
        client_id: REPORT_CLIENT.into(),
    }
}

/// The views of a chain of expansions of a side (`views_in_turn`): `each(i, boxes)` after the
/// first `i` nodes of `path` opened (0: the root view). A failed layout fails the report.
fn in_turn(
    state: &State,
    meta: &pb::MetaData,
    side: &str,
    path: &[&str],
    each: EachView<'_>,
) -> Result<()> {
    views_in_turn(state, Some(meta), side, path, each)
        .map_err(|_| HandlerError::Invalid(Msg::ExpandNode))
}

/// Lays out the view with `path` opened (ancestors first; empty: the root view) and keeps it if
/// it is new and fits. False when it did not fit.
fn lay_out(
    state: &State,
    meta: &pb::MetaData,
    side: &'static str,
    pane: &mut Pane,
    path: &[&str],
    budget: &mut Budget,
) -> Result<bool> {
    let mut fitted = true;
    in_turn(state, meta, side, path, &mut |i, boxes| {
        if i == path.len() {
            let boxes = boxes();
            if path.is_empty() {
                pane.root_boxes = boxes.len();
                if boxes.len() > MAX_ROOT_BOXES {
                    fitted = false;
                    return;
                }
            }
            budget.boxes_left = budget.boxes_left.saturating_sub(boxes.len());
            fitted = keep_view(pane, boxes, budget);
        }
    })?;
    Ok(fitted)
}
/// Adds a view's boxes to the pane (new nodes' fixed fields, the view's positions) if it is not
/// there yet and fits; true when it is there afterwards.
fn keep_view(pane: &mut Pane, boxes: Vec<pb::RenderNode>, budget: &mut Budget) -> bool {
    let open: BTreeSet<String> = boxes
        .iter()
        .filter(|b| b.expand && !b.is_root)
        .map(|b| b.key.clone())
        .collect();
    let open: Vec<String> = open.into_iter().collect();
    if pane.view_keys.contains(&open) {
        return true;
    }
    // The nodes not in the pane yet, numbered after those that are.
    let mut new_nodes: Vec<(String, Value, String, i32)> = Vec::new();
    let mut new_index: HashMap<&str, usize> = HashMap::new();
    let mut cost = open.iter().map(|k| k.len() + 3).sum::<usize>() + 32;
    for (k, b) in boxes.iter().enumerate() {
        // Over the budget already: no need to encode the rest (a level of 10⁵ boxes would take
        // hundreds of MB of values to be dropped); what the whole would take is estimated.
        if cost > budget.left {
            budget.wanted = cost / k.max(1) * boxes.len();
            return false;
        }
        if pane.index.contains_key(&b.key) || new_index.contains_key(b.key.as_str()) {
            continue;
        }
        let fixed = pb::RenderNode {
            x: 0,
            y: 0,
            width: 0,
            height: 0,
            expand: false,
            children: None,
            ..b.clone()
        };
        let mut v = serde_json::from_slice::<Value>(&graph_ascend_proto::json::to_vec(&fixed))
            .unwrap_or(Value::Null);
        if let Some(obj) = v.as_object_mut() {
            for k in ["x", "y", "width", "height", "expand", "key", "children"] {
                obj.remove(k);
            }
        }
        cost += size_of(&v) + b.key.len() + 4;
        new_index.insert(b.key.as_str(), pane.keys.len() + new_nodes.len());
        new_nodes.push((b.key.clone(), v, b.parent_node.clone(), b.node_type));
    }
    let rows: Vec<BoxRow> = boxes
        .iter()
        .filter_map(|b| {
            let i = pane
                .index
                .get(&b.key)
                .or_else(|| new_index.get(b.key.as_str()))?;
            Some([
                *i as i64,
                i64::from(b.x),
                i64::from(b.y),
                i64::from(b.width),
                i64::from(b.height),
                i64::from(b.expand),
            ])
        })
        .collect();
    let encoded: Vec<Value> = match &pane.base {
        Some(base) => runs_against(base, &rows),
        None => rows.iter().map(|r| json!(r)).collect(),
    };
    let view = json!({ "open": open, "boxes": encoded });
    cost += size_of(&view);
    if !budget.spend(cost) {
        budget.wanted = cost;
        return false;
    }
    for (key, v, parent, node_type) in new_nodes {
        pane.index.insert(key.clone(), pane.keys.len());
        if !parent.is_empty() {
            pane.parents.insert(key.clone(), parent);
        }
        // Every box but an API call (node type 1) opens, as in the page.
        if node_type != API_NODE {
            pane.modules.insert(key.clone());
        }
        pane.keys.push(key);
        pane.nodes.push(v);
    }
    if pane.base.is_none() {
        pane.base = Some(Base::new(rows));
    }
    pane.view_keys.insert(open);
    pane.views.push(view);
    true
}

/// Lays out every view on the path to `node`: each ancestor opened in turn (its children
/// shown), then the node itself when it is a module. False when one did not fit.
fn path_to(
    state: &State,
    meta: &pb::MetaData,
    side: &'static str,
    pane: &mut Pane,
    node: &str,
    budget: &mut Budget,
) -> Result<Kept> {
    // Two layouts at least (the node revealed, its parent opened), each of the root view's
    // boxes at least.
    if budget.boxes_left < 2 * pane.root_boxes {
        return Ok(Kept::NotLaidOut);
    }
    budget.boxes_left -= pane.root_boxes;
    // The node revealed: its ancestors open.
    let mut revealed = Vec::new();
    in_turn(state, meta, side, &[node], &mut |i, boxes| {
        if i == 1 {
            revealed = boxes();
        }
    })?;
    let Some(target) = revealed.iter().find(|b| b.key == node) else {
        return Ok(Kept::Yes); // not in this graph (another micro step's): nothing to lay out
    };
    let is_module = target.node_type != API_NODE;
    let parents: HashMap<&str, &str> = revealed
        .iter()
        .filter(|b| !b.parent_node.is_empty())
        .map(|b| (b.key.as_str(), b.parent_node.as_str()))
        .collect();
    let roots: HashSet<&str> = revealed
        .iter()
        .filter(|b| b.is_root)
        .map(|b| b.key.as_str())
        .collect();
    let mut chain = Vec::new();
    let mut at = parents.get(node).copied();
    while let Some(p) = at {
        if roots.contains(p) || chain.len() > 10_000 {
            break;
        }
        chain.push(p);
        at = parents.get(p).copied();
    }
    chain.reverse();
    // Each ancestor opened in turn: its own view (the previous ones open too); then the node
    // itself when it is a module. One chain of layouts, each view kept when it is new.
    let mut path = chain;
    if is_module {
        path.push(node);
    }
    // Each view of the chain is about as wide as the revealed one.
    let cost = revealed.len().saturating_mul(path.len() + 1);
    if budget.boxes_left < cost {
        return Ok(Kept::NotLaidOut);
    }
    budget.boxes_left -= cost;
    let mut fitted = true;
    in_turn(state, meta, side, &path, &mut |i, boxes| {
        if i > 0 && !pane.view_keys.contains(&sorted(&path[..i])) {
            fitted &= keep_view(pane, boxes(), budget);
        }
    })?;
    Ok(if fitted { Kept::Yes } else { Kept::NoRoom })
}

fn sorted(path: &[&str]) -> Vec<String> {
    let set: BTreeSet<String> = path.iter().map(|s| (*s).to_owned()).collect();
    set.into_iter().collect()
}

/// One box of a view: node (position in the pane's `keys`), x, y, width, height, open (0/1).
type BoxRow = [i64; 6];

/// The root view's boxes, and where each node sits among them.
struct Base {
    rows: Vec<BoxRow>,
    at: HashMap<i64, usize>,
}

impl Base {
    fn new(rows: Vec<BoxRow>) -> Base {
        let at = rows.iter().enumerate().map(|(k, r)| (r[0], k)).collect();
        Base { rows, at }
    }
}

/// A view's boxes against the root view's: a box as `[node, x, y, width, height, open]`, or a run
/// of the root view's boxes, consecutive there and here, of the same size and state, all moved by
/// the same offset, as `[first, count, dx, dy]` (opening a module moves what follows it as one
/// block, so a view is a few runs and the boxes that are new).
fn runs_against(base: &Base, rows: &[BoxRow]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut k = 0;
    while k < rows.len() {
        let r = rows[k];
        let same = |q: usize, r: &BoxRow| {
            base.rows
                .get(q)
                .is_some_and(|b| b[0] == r[0] && b[3] == r[3] && b[4] == r[4] && b[5] == r[5])
        };
        match base.at.get(&r[0]).copied().filter(|&q| same(q, &r)) {
            Some(q) => {
                let (dx, dy) = (r[1] - base.rows[q][1], r[2] - base.rows[q][2]);
                let mut n = 1;
                while let Some(next) = rows.get(k + n) {
                    let moved = base
                        .rows
                        .get(q + n)
                        .is_some_and(|b| next[1] - b[1] == dx && next[2] - b[2] == dy);
                    if !(same(q + n, next) && moved) {
                        break;
                    }
                    n += 1;
                }
                out.push(json!([q, n, dx, dy]));
                k += n;
            }
            None => {
                out.push(json!(r));
                k += 1;
            }
        }
    }
    out
}

/// The content type of a report.
pub const REPORT_CONTENT_TYPE: &str = "text/html; charset=utf-8";

/// Bytes per chunk of a report download.
const REPORT_CHUNK_BYTES: usize = 1 << 20;

/// `exportReport`: the self-contained report of a served file, as a download (`<tag>_report.html`).
/// The provenance names the file by its run and name, not by the server's folders.
pub fn export_report(
    state: &State,
    req: pb::ExportReportRequest,
    created: String,
    send: &mut dyn FnMut(pb::FileChunk) -> bool,
) {
    let lang = Lang::parse(&req.lang);
    let html = (|| -> std::result::Result<String, String> {
        let dir = state.page_assets.as_deref().ok_or_else(|| {
            "the page's built assets were not found when the sidecar started (graph-ascend serve --page-assets DIR)".to_owned()
        })?;
        let assets = page_assets(dir).map_err(|e| e.to_string())?;
        let options = ReportOptions {
            step: req.step,
            rank: req.rank,
            no_paths: req.no_paths,
            max_bytes: DEFAULT_REPORT_BYTES,
            source: format!("{}/{}.vis.db", req.run, req.tag),
            tool: format!("graph-ascend {}", env!("CARGO_PKG_VERSION")),
            created,
        };
        let data = report_data(state, &req.run, &req.tag, &options).map_err(|e| e.text(lang))?;
        Ok(report_html(
            &assets,
            &data.json,
            &format!("GRAPH_ASCEND report: {}.vis.db", req.tag),
        ))
    })();
    let html = match html {
        Ok(html) => html,
        Err(error) => {
            send(pb::FileChunk::failure(error));
            return;
        }
    };
    let header = pb::FileChunk {
        success: true,
        error: None,
        content_type: REPORT_CONTENT_TYPE.to_owned(),
        file_name: format!("{}_report.html", req.tag),
        data: Vec::new(),
    };
    if !send(header) {
        return;
    }
    for chunk in html.as_bytes().chunks(REPORT_CHUNK_BYTES) {
        let piece = pb::FileChunk {
            success: true,
            data: chunk.to_vec(),
            ..Default::default()
        };
        if !send(piece) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{point_order, points_text};
    use graph_ascend_proto as pb;

    #[test]
    fn names_steps_and_ranks_by_ranges() {
        assert_eq!(
            points_text(&[(0, 0), (0, 1), (0, 3), (1, 2)]),
            "step 0: ranks 0–1, 3; step 1: rank 2"
        );
        assert_eq!(points_text(&[]), "");
    }

    #[test]
    fn orders_the_points_from_the_source_on() {
        let d = pb::Diagnosis {
            sources: vec![pb::DiagnosisSource {
                step: 1,
                rank: 1,
                ..Default::default()
            }],
            ..Default::default()
        };
        // The one it opens on, the sources', then what follows the opening step (its other
        // ranks first, then later steps); the earlier step is not held.
        assert_eq!(
            point_order(Some(&d), (1, 1), &[0, 1, 2], &[0, 1]),
            vec![(1, 1), (1, 0), (2, 1), (2, 0)]
        );
        // Chosen elsewhere: that point first, the source's next.
        assert_eq!(
            point_order(Some(&d), (0, 0), &[0, 1], &[0, 1])[..2],
            [(0, 0), (1, 1)]
        );
    }
}
