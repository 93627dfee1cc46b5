//! The report on stdout: text (per run its counts, the reasons of the calls not replayed, the
//! failing calls with the paired call's verdict beside them) or JSON.

use std::io::Write;

use graph_ascend_replay::{CallReport, Status};
use serde_json::{json, Value};

use super::graph_replay::{is_api_forward, GraphReplay, Paired, Run};
use super::inputs::Role;
use super::verdict_csv::{status_word, worst_output};

/// Every run of every graph with its counts and calls, and the pairs.
pub fn json(graphs: &[GraphReplay]) -> Value {
    let mut runs = Vec::new();
    let mut pairs = Vec::new();
    for g in graphs {
        for r in g.runs() {
            runs.push(json!({
                "role": r.role.word(),
                "graph": g.pairing.label,
                "dump": r.dump.dump_json,
                "summary": summary(&r.calls),
                "calls": r.calls,
            }));
        }
        for p in g.pairs() {
            pairs.push(json!({
                "graph": g.pairing.label,
                "target": p.target.map(|c| &c.name),
                "golden": p.golden.map(|c| &c.name),
                "target_status": p.target.map(|c| c.status),
                "golden_status": p.golden.map(|c| c.status),
            }));
        }
    }
    json!({ "runs": runs, "pairs": pairs })
}

/// Counts of one run: API forward calls, replayed, passed, failed, and the reasons of the rest.
pub fn summary(calls: &[CallReport]) -> Value {
    let api: Vec<&CallReport> = calls.iter().filter(|c| is_api_forward(c)).collect();
    let pass = api.iter().filter(|c| c.status == Status::Pass).count();
    let fail = api.iter().filter(|c| c.status == Status::Fail).count();
    let reasons = |calls: &mut dyn Iterator<Item = &CallReport>| -> Vec<Value> {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for c in calls.filter(|c| c.status == Status::NotReplayed) {
            let r = c.reason.clone().unwrap_or_default();
            match counts.iter_mut().find(|(k, _)| *k == r) {
                Some((_, n)) => *n += 1,
                None => counts.push((r, 1)),
            }
        }
        counts
            .into_iter()
            .map(|(r, n)| json!({"reason": r, "calls": n}))
            .collect()
    };
    json!({
        "api_forward_calls": api.len(),
        "replayed": pass + fail,
        "pass": pass,
        "fail": fail,
        "not_replayed": reasons(&mut api.iter().copied()),
        "other_records": reasons(&mut calls.iter().filter(|c| !is_api_forward(c))),
        "records": calls.len(),
    })
}

/// One graph: each run's counts and shown calls, each call with its partner's verdict.
pub fn write(out: &mut impl Write, g: &GraphReplay, all: bool) -> anyhow::Result<()> {
    let pairs = g.pairs();
    for r in g.runs() {
        write_run(out, r, g.pairing.label.as_deref(), all, &pairs)?;
    }
    Ok(())
}

/// The call `c` (of `role`'s run) pairs with.
fn partner<'a>(pairs: &[Paired<'a>], c: &CallReport, role: Role) -> Option<&'a CallReport> {
    pairs.iter().find_map(|p| {
        let (this, other) = match role {
            Role::Target => (p.target, p.golden),
            Role::Golden => (p.golden, p.target),
        };
        this.filter(|t| std::ptr::eq(*t, c)).and(other)
    })
}

fn write_run(
    out: &mut impl Write,
    run: &Run,
    label: Option<&str>,
    all: bool,
    pairs: &[Paired<'_>],
) -> anyhow::Result<()> {
    let s = summary(&run.calls);
    let role = match label {
        Some(l) => format!("{} ({l})", run.role.word()),
        None => run.role.word().to_string(),
    };
    writeln!(
        out,
        "{role}: {} — {} API calls (forward), {} replayed: {} pass, {} fail",
        run.dump.dump_json.display(),
        s["api_forward_calls"],
        s["replayed"],
        s["pass"],
        s["fail"]
    )?;
    for r in s["not_replayed"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "  not replayed ({} calls): {}",
            r["calls"],
            r["reason"].as_str().unwrap_or("")
        )?;
    }
    for r in s["other_records"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "  other records ({}): {}",
            r["calls"],
            r["reason"].as_str().unwrap_or("")
        )?;
    }
    let mut shown: Vec<&CallReport> = run
        .calls
        .iter()
        .filter(|c| c.status == Status::Fail || (all && c.status == Status::Pass))
        .collect();
    shown.sort_by_key(|c| c.status != Status::Fail);
    let other_role = match run.role {
        Role::Target => "golden",
        Role::Golden => "target",
    };
    for c in shown {
        let tag = if c.status == Status::Fail {
            "FAIL"
        } else {
            "pass"
        };
        let dtype = c.ran_in.map(|d| d.to_string()).unwrap_or_default();
        writeln!(out, "  {tag} {} ({dtype})", c.name)?;
        for n in &c.notes {
            writeln!(out, "       note: {n}")?;
        }
        for o in &c.outputs {
            let m = &o.msprobe;
            writeln!(
                out,
                "       output {}: {}; msprobe: {} (cosine {}, max abs {}, RMSE {:.3e}, EB {:.4})",
                o.index,
                o.ours.why,
                m.status,
                m.cosine.map_or("-".into(), |c| format!("{c:.6}")),
                m.max_abs_err.map_or("-".into(), |e| format!("{e:.3e}")),
                m.rmse,
                m.error_balance,
            )?;
        }
        if let Some(p) = partner(pairs, c, run.role) {
            let detail = match (p.status, worst_output(p)) {
                (Status::NotReplayed, _) => p.reason.clone().unwrap_or_default(),
                (_, Some(o)) => format!(
                    "max {:.2} ULP, {:.2} of its budget",
                    o.ours.max_ulp, o.ours.worst_budget_ratio
                ),
                (_, None) => String::new(),
            };
            writeln!(
                out,
                "       {other_role} {}: {} ({detail})",
                p.name,
                status_word(p.status)
            )?;
        }
    }
    Ok(())
}
