//! A [`DivergenceMap`] for people (a grid of symbols, one per cell) and programs (JSON, CSV).

use std::fmt::Write as _;

use crate::csv::csv_line;
use crate::load::Direction;
use crate::map::{Cell, ColumnAxis, DepthRule, DivergenceMap};

/// The symbol of a cell in the text grid ([`LEGEND`]).
pub fn symbol(cell: Option<&Cell>) -> char {
    let Some(c) = cell else { return ' ' };
    if c.sources > 0 {
        return 'S';
    }
    if c.from_rank.is_some() {
        return '<';
    }
    match c.ratio {
        None => '-',
        Some(r) if r < 0.1 => '.',
        Some(r) if r < 1.0 => ':',
        Some(r) if r < 10.0 => 'o',
        Some(r) if r < 100.0 => 'O',
        Some(_) => '#',
    }
}

/// What the symbols of [`symbol`] mean.
pub const LEGEND: &str = "\
legend: S holds a source   < error received from a peer rank   \
(else the output error / its tolerance:) . below 0.1   : 0.1-1   o 1-10   O 10-100   \
# 100 or more, inf/NaN   - not compared (unmatched)   blank: the rank does not hold the module";

fn direction_label(d: Direction) -> &'static str {
    match d {
        Direction::Forward => "forward",
        Direction::Backward => "backward",
        Direction::Update => "update",
    }
}

fn ranks_text(first: i64, last: i64) -> String {
    if first == last {
        format!("rank {first}")
    } else {
        format!("ranks {first}-{last}")
    }
}

/// The grid: one line per row, one symbol per column, `|` between steps.
pub fn text(m: &DivergenceMap) -> String {
    let mut out = String::new();
    let rule = match m.depth_rule {
        DepthRule::Chosen => "chosen",
        DepthRule::RepeatedBlocks => "the repeated blocks",
        DepthRule::TopLevel => "top level: no repeated blocks",
    };
    let aggregated = m.columns.iter().filter(|c| c.width > 1).count();
    let _ = writeln!(
        out,
        "divergence map: {:?} mode, depth {} ({rule}), steps {:?}, {} ranks, {} columns{}{}",
        m.mode,
        m.depth,
        m.steps,
        m.ranks.len(),
        m.columns.len(),
        match m.axis {
            ColumnAxis::Ranks => " (step x rank)",
            ColumnAxis::MicroBatches => " (step x rank x micro-batch)",
        },
        if aggregated > 0 {
            format!(", {aggregated} of them aggregate several to the worst")
        } else {
            String::new()
        }
    );
    let mut steps = Vec::new();
    let mut k = 0;
    while k < m.columns.len() {
        let step = m.columns[k].step;
        let run = m.columns[k..].iter().take_while(|c| c.step == step).count();
        let (a, b) = (&m.columns[k], &m.columns[k + run - 1]);
        steps.push(format!(
            "step {step}: {} ({run} columns)",
            ranks_text(a.rank_first, b.rank_last)
        ));
        k += run;
    }
    let _ = writeln!(out, "columns: {}", steps.join(" | "));
    let _ = writeln!(out, "{LEGEND}");
    if let Some(f) = &m.first_source {
        let row = &m.bands[f.band].rows[f.row];
        let _ = writeln!(
            out,
            "first source: step {}, rank {}, {} ({} {})",
            f.step,
            f.rank,
            f.node,
            direction_label(m.bands[f.band].direction),
            row.label
        );
    }
    let width = m
        .bands
        .iter()
        .flat_map(|b| &b.rows)
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0);
    for band in &m.bands {
        let _ = writeln!(out, "{}", direction_label(band.direction));
        for row in &band.rows {
            let mut line = format!("  {:<width$} |", row.label);
            for (k, cell) in row.cells.iter().enumerate() {
                if k > 0 && m.columns[k].step != m.columns[k - 1].step {
                    line.push('|');
                }
                line.push(symbol(cell.as_ref()));
            }
            line.push('|');
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    out
}

/// The map as JSON.
pub fn json(m: &DivergenceMap) -> String {
    serde_json::to_string_pretty(m).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

fn number(v: Option<f64>) -> String {
    match v {
        None => String::new(),
        Some(x) if x.is_finite() => format!("{x:e}"),
        Some(x) if x.is_nan() => "NaN".into(),
        Some(x) if x > 0.0 => "Infinity".into(),
        Some(_) => "-Infinity".into(),
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// One line per cell a rank holds (blank cells are left out).
pub fn csv(m: &DivergenceMap) -> String {
    let mut out = String::new();
    csv_line(
        &mut out,
        [
            "direction",
            "row",
            "module",
            "column",
            "step",
            "rank_first",
            "rank_last",
            "micro_first",
            "micro_last",
            "ratio",
            "err",
            "tolerance",
            "rank",
            "micro_step",
            "node",
            "sources",
            "source",
            "source_rank",
            "from_rank",
        ],
    );
    for band in &m.bands {
        for row in &band.rows {
            for (k, cell) in row.cells.iter().enumerate() {
                let Some(c) = cell else { continue };
                let col = &m.columns[k];
                let fields = [
                    direction_label(band.direction).to_owned(),
                    row.label.clone(),
                    row.module.clone(),
                    k.to_string(),
                    col.step.to_string(),
                    col.rank_first.to_string(),
                    col.rank_last.to_string(),
                    opt(col.micro_first),
                    opt(col.micro_last),
                    number(c.ratio),
                    number(c.err),
                    number(c.tolerance),
                    c.rank.to_string(),
                    c.micro_step.to_string(),
                    c.node.clone(),
                    c.sources.to_string(),
                    c.source.clone().unwrap_or_default(),
                    opt(c.source_rank),
                    opt(c.from_rank),
                ];
                csv_line(&mut out, fields.iter().map(String::as_str));
            }
        }
    }
    out
}
