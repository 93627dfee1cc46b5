//! Computation the dump did not see (docs/diagnosis.md §14): a module whose output is, in the
//! golden run, the very tensor one of its dumped calls wrote, but which in the target differs
//! from golden by more than that call's noise while the call itself agrees. Something between
//! the call and the module's end changed it: a hook, a fused operator msprobe does not wrap
//! (a custom autograd `Function`), code on `torch.ops.aten` — msprobe dumps only the APIs on its
//! list.
//!
//! # Which call's output is the module's
//! Told from the dumps alone, never from names: the module's output entry and a direct child's
//! output entry hold the same statistics, bit for bit, on the golden side (and the same shape,
//! md5 when both have one), and that child is the last such in execution order. The same tensor
//! seen twice by msprobe's hooks; two different tensors with four equal float statistics do not
//! happen by chance (a tensor of zeros is not taken).
//!
//! - Forward: the module's output is usually its last call's (`FeedForward` ← `fc2`).
//! - Backward: a module's outputs are its input gradients, and it is the child that ran last in
//!   backward (the first in forward, `fc1`) that produced it — when the input has a *single
//!   consumer* inside the module. An input with several consumers (a residual stream, q/k/v
//!   from one norm) receives the sum of their gradients, equal to none of them: the rule then
//!   does not apply, by the same test.
//! - msprobe runs its own forward hook on a module *before* any the user registered (it moves
//!   it to the front): what a user's forward hook changes is not in the module's record but in
//!   what the next dumped call reads. So the same test runs the other way
//!   ([`changed_before_read`]): a node's input that is, in the golden run, the very tensor an
//!   earlier node's output was (the last such in execution order, not inside the node), but
//!   which in the target differs from golden by more than that output's noise while that
//!   output agrees: the producer's output changed after its record and before this read. The
//!   producer is the source: it is the last place the dump saw the tensor right.
//! - msprobe reads an API's backward at the autograd node of its output: a `Linear` on a 3-D
//!   input records a reshape's gradient (`[16, 64]` for an input of `[2, 8, 32]`), not the input
//!   gradient of the call. No child's output then matches the module's: the module's backward
//!   *is* the kernel's ([`kernel_backward`]), and a source there says so.

use crate::entry::{Entry, Kind, Role};
use crate::judge::{deviation, Judge, Metric};
use crate::load::{Direction, Mode, RankData};
use crate::options::Options;

/// A module that changed the output of its last dumped call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unseen {
    /// The dumped call (a direct child) whose output the module's is in the golden run.
    pub call: u32,
    /// The module's output entry (`output.0`).
    pub entry: Box<str>,
    /// The module's error on that entry, against golden.
    pub err: f64,
    pub metric: Metric,
    /// The call's error on the same tensor, against golden.
    pub call_err: f64,
}

/// Where a node's input was changed after the record of the node that produced it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChangedBeforeRead {
    /// The node that read it.
    pub reader: u32,
    /// The producer's output entry.
    pub entry: Box<str>,
    /// The reader's error on it, against golden.
    pub err: f64,
    pub metric: Metric,
    /// The producer's error on it, against golden.
    pub producer_err: f64,
}

/// A golden tensor's identity: its shape and the bits of its four statistics.
fn identity(e: &Entry) -> Option<u64> {
    let non_zero = e.stats.norm().is_some_and(|n| n.is_finite() && n > 0.0);
    if e.kind() != Kind::Tensor || !non_zero {
        return None;
    }
    let mut h = e.shape() ^ 0x9e37_79b9_7f4a_7c15;
    for v in e.stats.all() {
        let bits = v?.to_bits();
        h = (h ^ bits).wrapping_mul(0x0100_0000_01b3).rotate_left(29);
    }
    Some(h)
}

/// For every judged node of `judge`'s rank whose activation input was changed between the
/// record of the node that produced it and this read: the producer → the first such read (see
/// the module's docs). `order` is the execution order.
pub(crate) fn changed_before_read(
    judge: &Judge<'_>,
    mode: Mode,
    opts: &Options,
    order: &[u32],
) -> foldhash::HashMap<u32, ChangedBeforeRead> {
    use rayon::prelude::*;
    let data = judge.data();
    let mut pos = vec![u32::MAX; data.npu.nodes.len()];
    for (k, &i) in order.iter().enumerate() {
        pos[i as usize] = k as u32;
    }
    // golden identity of an output → (execution position, target node, output position)
    let mut outputs: foldhash::HashMap<u64, Vec<(u32, u32, usize)>> = Default::default();
    for &i in order {
        let n = data.npu.node(i);
        if n.param_grad {
            continue;
        }
        let Some(b) = data.partner(i) else { continue };
        for (p, e) in tensor_outputs(data.bench.outputs(b)).enumerate() {
            if let Some(id) = identity(e) {
                outputs.entry(id).or_default().push((pos[i as usize], i, p));
            }
        }
    }
    let found: Vec<(u32, ChangedBeforeRead)> = order
        .par_iter()
        .filter_map(|&x| {
            let n = data.npu.node(x);
            if n.param_grad {
                return None;
            }
            let b = data.bench.node(data.partner(x)?);
            let inputs = |e: &[Entry]| {
                e.iter()
                    .filter(|e| e.role() == Role::Input && e.kind() == Kind::Tensor)
                    .cloned()
                    .collect::<Vec<_>>()
            };
            let (ti, gi) = (inputs(n.inputs()), inputs(b.inputs()));
            for (t_in, g_in) in ti.iter().zip(&gi) {
                let Some(id) = identity(g_in) else { continue };
                let Some(candidates) = outputs.get(&id) else {
                    continue;
                };
                let at = pos[x as usize];
                // The producers before the read that are not inside the reader: the same
                // tensor at each hook it passed (the API that wrote it, its modules).
                let before: Vec<(u32, u32, usize)> = candidates
                    .iter()
                    .copied()
                    .filter(|(q, c, _)| *q < at && !data.npu.ancestors(*c).any(|a| a == x))
                    .collect();
                // The last of them is the source.
                let Some(&(_, p, k)) = before.iter().max_by_key(|(q, ..)| *q) else {
                    continue;
                };
                let pb = data.bench.node(data.partner(p)?);
                let (Some(t_out), Some(g_out)) = (
                    tensor_outputs(data.npu.node(p).outputs()).nth(k),
                    tensor_outputs(pb.outputs()).nth(k),
                ) else {
                    continue;
                };
                if !same_tensor(g_out, g_in) || same_tensor(t_out, t_in) {
                    continue;
                }
                // The tensor's noise: the tightest tolerance learned for any of the kinds that
                // hold it (the API's kind has the most samples), else the producer's.
                let levels: Vec<(crate::options::Tolerance, bool)> = before
                    .iter()
                    .filter_map(|&(_, c, _)| {
                        let l = judge.node(c)?.output?;
                        Some((l.tolerance, l.learned))
                    })
                    .collect();
                let Some(&(own, own_learned)) = judge
                    .node(p)
                    .and_then(|j| j.output.map(|l| (l.tolerance, l.learned)))
                    .as_ref()
                else {
                    continue;
                };
                let (tol, learned) = levels
                    .iter()
                    .copied()
                    .filter(|(_, learned)| *learned)
                    .min_by(|a, b| a.0.jump.total_cmp(&b.0.jump))
                    .unwrap_or((own, own_learned));
                let (Some(dx), Some(dp)) =
                    (deviation(mode, t_in, g_in), deviation(mode, t_out, g_out))
                else {
                    continue;
                };
                let changed = if learned {
                    dx.err - dp.err > tol.jump
                } else {
                    dx.err > tol.jump && dx.err > opts.jump_ratio * dp.err
                };
                if dp.err <= tol.agree && changed {
                    return Some((
                        p,
                        ChangedBeforeRead {
                            reader: x,
                            entry: t_out.name().into(),
                            err: dx.err,
                            metric: dx.metric,
                            producer_err: dp.err,
                        },
                    ));
                }
            }
            None
        })
        .collect();
    let mut by_producer: foldhash::HashMap<u32, ChangedBeforeRead> = Default::default();
    for (p, c) in found {
        let first = by_producer.entry(p).or_insert_with(|| c.clone());
        if pos[c.reader as usize] < pos[first.reader as usize] {
            *first = c;
        }
    }
    by_producer
}

/// The tensor outputs of a node, in order.
fn tensor_outputs(e: &[Entry]) -> impl Iterator<Item = &Entry> {
    e.iter()
        .filter(|e| e.role() == Role::Output && e.kind() == Kind::Tensor)
}

/// Whether two golden entries are the same tensor: same shape, bit-for-bit the same four
/// statistics (all present, a Norm above zero), the same md5 when both have one.
fn same_tensor(a: &Entry, b: &Entry) -> bool {
    if a.shape() != b.shape() {
        return false;
    }
    let (x, y) = (a.stats.all(), b.stats.all());
    let stats_equal = x
        .iter()
        .zip(y.iter())
        .all(|(p, q)| matches!((p, q), (Some(p), Some(q)) if p.to_bits() == q.to_bits()));
    let non_zero = a.stats.norm().is_some_and(|n| n.is_finite() && n > 0.0);
    let md5 = match (a.md5(), b.md5()) {
        (Some(p), Some(q)) => p == q,
        _ => true,
    };
    stats_equal && non_zero && md5
}

/// For module `i`, its output entries that are, in the golden run, a direct child's output:
/// `(module entry position, child, child entry position)`, the child the last in execution
/// order (children run in the order listed).
pub(crate) fn produced_by(data: &RankData, i: u32) -> Vec<(usize, u32, usize)> {
    let n = data.npu.node(i);
    let Some(b) = data.partner(i) else {
        return Vec::new();
    };
    let golden = data.bench.node(b);
    let mut found = Vec::new();
    for (k, out) in tensor_outputs(golden.outputs()).enumerate() {
        let hit = n.children.iter().rev().find_map(|&c| {
            let cb = data.bench.node(data.partner(c)?);
            if data.npu.node(c).param_grad {
                return None;
            }
            tensor_outputs(cb.outputs())
                .position(|e| same_tensor(e, out))
                .map(|p| (c, p))
        });
        if let Some((c, p)) = hit {
            found.push((k, c, p));
        }
    }
    found
}

/// Whether module node `i` changed the output of the dumped call that produced it (see the
/// module's docs): its output is off golden by more than the call's tolerance beyond what the
/// call's is, and the call's agrees. Against a learned tolerance (the call's op kind's noise)
/// what the module adds must exceed it; against the dtype table, the module's error must be
/// above the jump tolerance and `jump_ratio` times the call's.
pub(crate) fn unseen(judge: &Judge<'_>, mode: Mode, opts: &Options, i: u32) -> Option<Unseen> {
    let data = judge.data();
    let n = data.npu.node(i);
    if n.node_type != 0 || n.param_grad {
        return None;
    }
    let b = data.bench.node(data.partner(i)?);
    let mut best: Option<Unseen> = None;
    for (k, c, p) in produced_by(data, i) {
        let Some(jc) = judge.node(c) else { continue };
        let Some(level) = jc.output.as_ref() else {
            continue;
        };
        let cb = data.bench.node(data.partner(c)?);
        let (Some(mt), Some(mg)) = (
            tensor_outputs(n.outputs()).nth(k),
            tensor_outputs(b.outputs()).nth(k),
        ) else {
            continue;
        };
        let (Some(ct), Some(cg)) = (
            tensor_outputs(data.npu.node(c).outputs()).nth(p),
            tensor_outputs(cb.outputs()).nth(p),
        ) else {
            continue;
        };
        // The target's module wrote the very tensor its call did: nothing in between.
        if same_tensor(mt, ct) || mode == Mode::Md5 && mt.md5().is_some() && mt.md5() == ct.md5() {
            continue;
        }
        let (Some(dm), Some(dc)) = (deviation(mode, mt, mg), deviation(mode, ct, cg)) else {
            continue;
        };
        let tol = level.tolerance;
        let call_agrees = dc.err <= tol.agree;
        let changed = if level.learned {
            dm.err - dc.err > tol.jump
        } else {
            dm.err > tol.jump && dm.err > opts.jump_ratio * dc.err
        };
        if call_agrees && changed && best.as_ref().is_none_or(|u| dm.err > u.err) {
            best = Some(Unseen {
                call: c,
                entry: mt.name().into(),
                err: dm.err,
                metric: dm.metric,
                call_err: dc.err,
            });
        }
    }
    best
}

/// For a backward module whose outputs no child's output matches: the API child whose backward
/// record holds no input gradient of its call (its outputs have none of the module's output
/// shapes: msprobe read the gradient at a reshape after the kernel), when it is the module's
/// only API child. Then the module's backward is that kernel's.
pub(crate) fn kernel_backward(data: &RankData, i: u32) -> Option<u32> {
    let n = data.npu.node(i);
    if n.node_type != 0 || n.direction != Direction::Backward {
        return None;
    }
    let mut apis = n
        .children
        .iter()
        .copied()
        .filter(|&c| data.npu.node(c).node_type != 0 && !data.npu.node(c).param_grad);
    let api = apis.next()?;
    if apis.next().is_some() {
        return None;
    }
    let shapes: Vec<u64> = tensor_outputs(n.outputs()).map(Entry::shape).collect();
    let records_input_gradient = tensor_outputs(data.npu.node(api).outputs())
        .any(|e| e.shape() != 0 && shapes.contains(&e.shape()));
    (!records_input_gradient && !shapes.is_empty()).then_some(api)
}

/// The name of a call as its module's reason says it: a child module's path below the
/// module's (`fc1` for `Module.layers.2.mlp.fc1.Linear.backward.0` in `layers.2.mlp`), an API's
/// node name.
pub(crate) fn call_label(module: &str, call: &str, call_is_module: bool) -> String {
    fn path(name: &str) -> Option<&str> {
        // <Prefix>.<path…>.<Class>.<forward|backward>.<index>
        let (_, rest) = name.split_once('.')?;
        let mut it = rest.rsplitn(4, '.');
        let (_index, _pass, _class) = (it.next()?, it.next()?, it.next()?);
        it.next()
    }
    if call_is_module {
        if let (Some(m), Some(c)) = (path(module), path(call)) {
            if let Some(tail) = c.strip_prefix(m).and_then(|t| t.strip_prefix('.')) {
                return tail.to_owned();
            }
            return c.to_owned();
        }
    }
    call.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_named_by_its_path_below_the_module() {
        assert_eq!(
            call_label(
                "Module.layers.2.mlp.FeedForward.backward.0",
                "Module.layers.2.mlp.fc1.Linear.backward.0",
                true
            ),
            "fc1"
        );
        assert_eq!(
            call_label(
                "Module.layers.2.mlp.fc1.Linear.forward.0",
                "Functional.linear.9.forward",
                false
            ),
            "Functional.linear.9.forward"
        );
    }
}
