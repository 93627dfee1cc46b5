//! A [`Diagnosis`] for people (text) and programs (JSON, CSV).

use std::fmt::Write as _;

use crate::diagnose::{Diagnosis, Direction, SourceKind};
use crate::export::csv_line;

/// The diagnosis with at most `top` sources.
fn truncated(d: &Diagnosis, top: usize) -> Diagnosis {
    let mut d = d.clone();
    d.sources.truncate(top);
    d
}

fn kind_label(kind: &SourceKind) -> &'static str {
    match kind {
        SourceKind::Cause => "cause",
        SourceKind::Introduced => "introduced",
        SourceKind::Amplified => "amplified",
    }
}

fn direction_label(d: Direction) -> &'static str {
    match d {
        Direction::Forward => "forward",
        Direction::Backward => "backward",
        Direction::Update => "update",
    }
}

/// Text for a terminal: the step, the first inf/NaN, the ranked sources with their reasons.
pub fn text(d: &Diagnosis, top: usize) -> String {
    let mut out = String::new();
    let steps: Vec<String> = d
        .steps_checked
        .iter()
        .map(|c| {
            let state = if c.forward_differs {
                "forward differs"
            } else if c.any_differs {
                "backward differs"
            } else {
                "agrees"
            };
            format!("step {} {state}", c.step)
        })
        .collect();
    let _ = writeln!(
        out,
        "step {} (checked: {}), ranks {:?}, {:?} mode, {} matched nodes judged",
        d.step,
        steps.join(", "),
        d.ranks,
        d.mode,
        d.nodes_judged
    );
    if let Some(rank) = d.origin_rank {
        let _ = writeln!(out, "the error starts on rank {rank}");
    }
    for nf in &d.first_non_finite {
        let _ = writeln!(
            out,
            "first inf/NaN: rank {} {} ({}{}): {}",
            nf.rank,
            nf.node,
            direction_label(nf.direction),
            if nf.matched { "" } else { ", unmatched" },
            nf.reason
        );
    }
    for p in &d.peer_inheritance {
        let _ = writeln!(
            out,
            "rank {} {} inherits from rank {} ({})",
            p.rank, p.node, p.from_rank, p.from_node
        );
    }
    if d.sources.is_empty() {
        let _ = writeln!(out, "no source of error above the noise");
        return out;
    }
    let shown = d.sources.len().min(top);
    let _ = writeln!(out, "sources ({} of {}):", shown, d.sources.len());
    for (k, s) in d.sources.iter().take(top).enumerate() {
        let _ = writeln!(
            out,
            "{:>3}. rank {} {} [{} {}]",
            k + 1,
            s.rank,
            s.node,
            direction_label(s.direction),
            kind_label(&s.kind)
        );
        let _ = writeln!(out, "     {}", s.reason);
        if !s.enclosing.is_empty() {
            let _ = writeln!(out, "     inside: {}", s.enclosing.join(" < "));
        }
    }
    out
}

/// The diagnosis as JSON (at most `top` sources).
pub fn json(d: &Diagnosis, top: usize) -> String {
    serde_json::to_string_pretty(&truncated(d, top))
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The sources as CSV, one row each.
pub fn csv(d: &Diagnosis, top: usize) -> String {
    let mut out = String::new();
    csv_line(
        &mut out,
        [
            "rank",
            "step",
            "direction",
            "kind",
            "node",
            "golden_node",
            "score",
            "reason",
            "enclosing",
        ],
    );
    for s in d.sources.iter().take(top) {
        let score = s.score.map(|v| format!("{v:.6e}")).unwrap_or_default();
        let (rank, step) = (s.rank.to_string(), s.step.to_string());
        let enclosing = s.enclosing.join(" ");
        csv_line(
            &mut out,
            [
                rank.as_str(),
                step.as_str(),
                direction_label(s.direction),
                kind_label(&s.kind),
                &s.node,
                &s.golden_node,
                &score,
                &s.reason,
                &enclosing,
            ],
        );
    }
    out
}
