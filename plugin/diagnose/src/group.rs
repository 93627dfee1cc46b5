//! One line per fault: the sources that are the same call site ([`crate::site`]) across
//! micro-batches, ranks and steps, grouped; ranks group together only within one
//! [`RankClass`].

use std::fmt::Write as _;

use foldhash::HashMap;

use crate::reason::ReasonPart;
use crate::site::{CallSite, RankClass};
use crate::source::{Source, SourceKind};

/// At most this many other occurrences are listed in a group (the counts cover them all).
pub const MAX_LISTED: usize = 64;

/// One occurrence of a group's call site.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Occurrence {
    pub step: i64,
    pub rank: i64,
    pub micro_step: i64,
    pub node: String,
    /// Its index in [`crate::Diagnosis::sources`].
    pub source: usize,
}

/// An inclusive range of steps or ranks.
pub type Span = (i64, i64);

/// The sources of one call site: one fault.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SourceGroup {
    pub site: CallSite,
    pub kind: SourceKind,
    /// The first occurrence (in the ranked list), which the page and the CLI open.
    pub first: Occurrence,
    /// Its reason, as the first occurrence's.
    pub reason: String,
    pub reason_parts: Vec<ReasonPart>,
    /// How many sources the group holds.
    pub occurrences: usize,
    /// The distinct micro-batches, ascending.
    pub micro_steps: Vec<i64>,
    /// The ranks, as ascending ranges.
    pub ranks: Vec<Span>,
    /// The steps, as ascending ranges.
    pub steps: Vec<Span>,
    /// The other occurrences, in ranked order (at most [`MAX_LISTED`]).
    pub others: Vec<Occurrence>,
    /// One line for people: "`Functional.linear` (2nd call) in `layers.2.mlp.fc1` — weight
    /// differs — 8 micro-batches, ranks 0–1023, from step 3".
    pub summary: String,
}

/// Sorted distinct values as inclusive ranges.
fn spans(mut values: Vec<i64>) -> Vec<Span> {
    values.sort_unstable();
    values.dedup();
    let mut out: Vec<Span> = Vec::new();
    for v in values {
        match out.last_mut() {
            Some((_, hi)) if *hi + 1 == v => *hi = v,
            _ => out.push((v, v)),
        }
    }
    out
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// A module's path as people write it: `Module.layers.2.mlp.fc1.Linear.forward` →
/// `layers.2.mlp.fc1`.
pub(crate) fn module_path(module: &str) -> &str {
    let body = module
        .split_once('.')
        .filter(|(prefix, _)| matches!(*prefix, "Module" | "Cell"))
        .map_or(module, |(_, rest)| rest);
    // Drop `.<Class>.<forward|backward>`.
    let mut parts = body.rsplitn(3, '.');
    let last = parts.next().unwrap_or("");
    if matches!(last, "forward" | "backward") {
        let _class = parts.next();
        if let Some(path) = parts.next() {
            return path;
        }
    }
    body
}

fn spans_text(spans: &[Span]) -> String {
    spans
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}–{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the group's kind says, short.
fn what(kind: &SourceKind, parts: &[ReasonPart]) -> String {
    let causes: Vec<String> = parts
        .iter()
        .filter_map(|p| match p {
            ReasonPart::ParameterDiffers { name, .. }
            | ReasonPart::ParameterMd5Differs { name, .. }
            | ReasonPart::ParameterNonFinite { name, .. }
            | ReasonPart::ArgumentDiffers { name, .. } => Some(format!("{name} differs")),
            _ => None,
        })
        .collect();
    match kind {
        SourceKind::Cause if !causes.is_empty() => causes.join(", "),
        SourceKind::Cause => "weight or argument differs".into(),
        SourceKind::Introduced => "error introduced here".into(),
        SourceKind::Amplified => "error amplified here".into(),
    }
}

fn summary(g: &SourceGroup) -> String {
    let mut out = String::new();
    let site = &g.site;
    if site.api.is_empty() {
        let _ = write!(out, "`{}`", module_path(&site.module));
    } else {
        let _ = write!(out, "`{}` ({} call)", site.api, ordinal(site.call + 1));
        if !site.module.is_empty() {
            let _ = write!(out, " in `{}`", module_path(&site.module));
        }
    }
    let _ = write!(out, " — {}", what(&g.kind, &g.reason_parts));
    let mut spread = Vec::new();
    if g.micro_steps.len() > 1 {
        spread.push(format!("{} micro-batches", g.micro_steps.len()));
    }
    let rank_count: i64 = g.ranks.iter().map(|(a, b)| b - a + 1).sum();
    spread.push(if rank_count == 1 {
        format!("rank {}", spans_text(&g.ranks))
    } else {
        format!("ranks {}", spans_text(&g.ranks))
    });
    let first_step = g.steps.first().map_or(0, |s| s.0);
    let last_step = g.steps.last().map_or(0, |s| s.1);
    spread.push(if first_step == last_step {
        format!("step {first_step}")
    } else {
        format!("from step {first_step}")
    });
    let _ = write!(out, " — {}", spread.join(", "));
    out
}

/// Groups ranked `sources` by call site (and rank class), in the order of their first
/// occurrence.
/// Sets each source's [`Source::group`].
pub fn group(sources: &mut [Source]) -> Vec<SourceGroup> {
    let mut index: HashMap<(CallSite, RankClass), usize> = HashMap::default();
    let mut groups: Vec<SourceGroup> = Vec::new();
    let mut members: Vec<(Vec<i64>, Vec<i64>, Vec<i64>)> = Vec::new();
    for (k, s) in sources.iter_mut().enumerate() {
        let (site, class) = (s.site.clone(), s.rank_class);
        let occurrence = Occurrence {
            step: s.step,
            rank: s.rank,
            micro_step: s.micro_step,
            node: s.node.clone(),
            source: k,
        };
        let g = *index.entry((site, class)).or_insert_with(|| {
            groups.push(SourceGroup {
                site: s.site.clone(),
                kind: s.kind.clone(),
                first: occurrence.clone(),
                reason: s.reason.clone(),
                reason_parts: s.reason_parts.clone(),
                occurrences: 0,
                micro_steps: Vec::new(),
                ranks: Vec::new(),
                steps: Vec::new(),
                others: Vec::new(),
                summary: String::new(),
            });
            members.push(Default::default());
            groups.len() - 1
        });
        s.group = g;
        let group = &mut groups[g];
        if group.occurrences > 0 && group.others.len() < MAX_LISTED {
            group.others.push(occurrence);
        }
        group.occurrences += 1;
        let (micro, ranks, steps) = &mut members[g];
        micro.push(s.micro_step);
        ranks.push(s.rank);
        steps.push(s.step);
    }
    for (g, (mut micro, ranks, steps)) in groups.iter_mut().zip(members) {
        micro.sort_unstable();
        micro.dedup();
        g.micro_steps = micro;
        g.ranks = spans(ranks);
        g.steps = spans(steps);
        g.summary = summary(g);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_paths_and_ordinals_read_as_people_say_them() {
        assert_eq!(
            module_path("Module.layers.2.mlp.fc1.Linear.forward"),
            "layers.2.mlp.fc1"
        );
        assert_eq!(
            module_path("Cell.layers.1.ln2.LayerNorm.backward"),
            "layers.1.ln2"
        );
        assert_eq!(ordinal(1), "1st");
        assert_eq!(ordinal(2), "2nd");
        assert_eq!(ordinal(11), "11th");
        assert_eq!(ordinal(23), "23rd");
    }

    #[test]
    fn ranks_and_steps_read_as_ranges() {
        assert_eq!(spans(vec![3, 0, 1, 2, 7, 5, 5]), [(0, 3), (5, 5), (7, 7)]);
        assert_eq!(spans_text(&[(0, 1023)]), "0–1023");
    }
}
