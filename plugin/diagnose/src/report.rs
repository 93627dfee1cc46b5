//! A [`Diagnosis`] for people (text) and programs (JSON, CSV).

use std::fmt::Write as _;

use crate::csv::csv_line;
use crate::diagnose::{Diagnosis, Direction, SourceKind};

/// The diagnosis with at most `top` sources and `top` groups.
fn truncated(d: &Diagnosis, top: usize) -> Diagnosis {
    let mut d = d.clone();
    d.sources.truncate(top);
    d.groups.truncate(top);
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

/// Which tolerances a diagnosis used, in words.
pub fn tolerances_label(d: &Diagnosis) -> String {
    match &d.tolerances {
        None => "the fixed dtype table".into(),
        Some(t) => {
            let kinds = t.kinds.len();
            match &t.from {
                crate::tolerance::LearnedFrom::Tightened => {
                    format!("the dtype table, tightened from this compare for {kinds} op kinds")
                }
                crate::tolerance::LearnedFrom::Reference { file } => format!(
                    "learned from {} for {kinds} op kinds (the dtype table for the others)",
                    file.display()
                ),
            }
        }
    }
}

/// Other occurrences a group names in the text (the JSON lists more).
const OTHERS_IN_TEXT: usize = 3;

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
    let _ = writeln!(out, "tolerances: {}", tolerances_label(d));
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
    let _ = writeln!(
        out,
        "faults ({} of {}; one line per call site across micro-batches, ranks and steps):",
        d.groups.len().min(top),
        d.groups.len()
    );
    for (k, g) in d.groups.iter().take(top).enumerate() {
        let _ = writeln!(out, "{:>3}. {}", k + 1, g.summary);
        let _ = writeln!(
            out,
            "     first: step {} rank {} {} ({})",
            g.first.step, g.first.rank, g.first.node, g.reason
        );
        if g.occurrences > 1 {
            let listed: Vec<String> = g
                .others
                .iter()
                .take(OTHERS_IN_TEXT)
                .map(|o| format!("step {} rank {} {}", o.step, o.rank, o.node))
                .collect();
            let more = g.occurrences - 1 - listed.len();
            let _ = writeln!(
                out,
                "     also: {}{}",
                listed.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            );
        }
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

/// The sources as CSV, one row each; `group` is the 1-based number of the source's fault
/// (its call site, as the text and JSON number `groups`), `fault` that group's line.
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
            "micro_step",
            "group",
            "fault",
        ],
    );
    for s in d.sources.iter().take(top) {
        let micro = s.micro_step.to_string();
        let (group, fault) = match d.groups.get(s.group) {
            Some(found) => ((s.group + 1).to_string(), found.summary.as_str()),
            None => (String::new(), ""),
        };
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
                &micro,
                &group,
                fault,
            ],
        );
    }
    out
}
