//! Tensor-parallel merging (msprobe's `TPMerger`): the statistics of a node split across the
//! ranks of a TP group are merged into the first rank's node (Max of maxima, Min of minima,
//! mean of means, root of the summed squared norms, rounded back to the tensor's dtype), with
//! notes saying how (`parallel_merge_info`).

use graph_ascend_dump::pyval::float_repr;
use graph_ascend_dump::PyVal;

use super::forest::{number, rank_mark, rank_sub_all, Forest, MGraph};
use super::merger::Merger;
use crate::node::NodeOp;

pub(crate) const TP_MERGED_INFO: &str =
    "This data is the merged data after tensor parallelism(TP), and the data is merged from rank ";

const UNMERGED_MODULES: [&str; 2] = ["clip_grad", "optimizer"];
const DTYPES: [&str; 10] = [
    "torch.int8",
    "torch.int32",
    "torch.int64",
    "torch.bfloat16",
    "torch.float16",
    "torch.float32",
    "torch.float64",
    "Float16",
    "Float32",
    "BFloat16",
];
const UNCERTAINTY_THRESHOLD: f64 = 1e-6;
const STATS: [&str; 4] = ["Max", "Min", "Mean", "Norm"];

/// One item of one node: `(node, is output, index in the list)`.
pub(crate) type ParamRef = (usize, bool, usize);
/// Items to merge, by their key without the node id (`input.0`, `parameters.weight`).
pub(crate) type NeedMerge = Vec<(String, Vec<ParamRef>)>;

fn value(f: &Forest, r: ParamRef, stat: &str) -> Option<PyVal> {
    let n = &f.nodes[r.0];
    let list = if r.1 { &n.output } else { &n.input };
    list.get(r.2).and_then(|(_, it)| it.get(stat).cloned())
}

fn dtype_ok(f: &Forest, r: ParamRef) -> bool {
    matches!(value(f, r, "dtype"), Some(PyVal::Str(d)) if DTYPES.contains(&d.as_str()))
}

fn is_num(v: &Option<PyVal>) -> bool {
    matches!(
        v,
        Some(PyVal::Int(_) | PyVal::Float(_) | PyVal::BigInt(_) | PyVal::Bool(_))
    )
}

/// `_compare_value_same`.
fn value_same(a: &Option<PyVal>, b: &Option<PyVal>, uncertain: bool) -> bool {
    if !is_num(a) || !is_num(b) {
        return true;
    }
    let (Some(x), Some(y)) = (number(a.as_ref()), number(b.as_ref())) else {
        return true;
    };
    if uncertain {
        let diff = (x - y).abs();
        if diff.is_nan() {
            x.is_nan() && y.is_nan()
        } else if diff.is_infinite() {
            x.is_infinite() && y.is_infinite()
        } else if x == 0.0 {
            diff < UNCERTAINTY_THRESHOLD
        } else {
            (diff / x).abs() < UNCERTAINTY_THRESHOLD
        }
    } else {
        x == y
    }
}

/// `compare_param_same`.
pub(crate) fn param_same(f: &Forest, a: ParamRef, b: ParamRef, uncertain: bool) -> bool {
    STATS.iter().all(|s| {
        let unc = uncertain && (*s == "Mean" || *s == "Norm");
        value_same(&value(f, a, s), &value(f, b, s), unc)
    })
}

/// `compare_node_param_data`: the inputs and outputs of `main` whose data differ from the
/// same items of `others` (all of them when `compare_data` is false).
pub(crate) fn param_data_diff(
    f: &Forest,
    main: usize,
    others: &[usize],
    compare_data: bool,
) -> (NeedMerge, NeedMerge) {
    if others.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let main_id = &f.nodes[main].id;
    let prefix = format!("{main_id}.");
    let mut result = (Vec::new(), Vec::new());
    for out in [false, true] {
        let items = if out {
            &f.nodes[main].output
        } else {
            &f.nodes[main].input
        };
        let dest = if out { &mut result.1 } else { &mut result.0 };
        for (i, (key, _)) in items.iter().enumerate() {
            let main_ref = (main, out, i);
            if !dtype_ok(f, main_ref) {
                continue;
            }
            let mut same = compare_data;
            let mut list = vec![main_ref];
            for &o in others {
                let other_id = &f.nodes[o].id;
                let okey = if main_id != other_id {
                    key.replace(main_id.as_str(), other_id)
                } else {
                    key.clone()
                };
                let olist = if out {
                    &f.nodes[o].output
                } else {
                    &f.nodes[o].input
                };
                let Some(j) = olist.iter().position(|(k, _)| *k == okey) else {
                    break;
                };
                let oref = (o, out, j);
                if !dtype_ok(f, oref) {
                    break;
                }
                list.push(oref);
                if compare_data && !param_same(f, main_ref, oref, true) {
                    same = false;
                }
            }
            if !same {
                let short = key.replace(prefix.as_str(), "");
                match dest.iter_mut().find(|(k, _)| *k == short) {
                    Some(e) => e.1 = list,
                    None => dest.push((short, list)),
                }
            }
        }
    }
    result
}

fn remove_key(v: &mut NeedMerge, key: &str) {
    v.retain(|(k, _)| k != key);
}

/// A merged value rounded to the dump's precision, as `torch.tensor(v, dtype).item()` does
/// (through float32 first, as torch converts a Python float).
/// Python's `pow(x, y)` for floats: the C library's `pow`, called as such (the exponent hidden
/// from the optimiser, which turns `powf(2.0)` into `x * x` and `powf(0.5)` into `sqrt`, each of
/// which can differ from `pow` in the last bit).
fn py_pow(x: f64, y: f64) -> f64 {
    x.powf(std::hint::black_box(y))
}

fn cast_to_dtype(v: f64, dtype: Option<&PyVal>) -> f64 {
    if !v.is_finite() {
        return v;
    }
    let Some(PyVal::Str(d)) = dtype else {
        return v;
    };
    let f32v = v as f32;
    if !f32v.is_finite() {
        return v;
    }
    match d.as_str() {
        "torch.float32" | "Float32" => f32v as f64,
        "torch.float16" | "Float16" => half::f16::from_f32(f32v).to_f64(),
        "torch.bfloat16" | "BFloat16" => half::bf16::from_f32(f32v).to_f64(),
        _ => v,
    }
}

/// Python's `str()` of a number.
fn py_str(v: &PyVal) -> String {
    v.py_str()
}

/// Python's `a > b` for numbers.
fn gt(a: &PyVal, b: &PyVal) -> bool {
    match (number(Some(a)), number(Some(b))) {
        (Some(x), Some(y)) => x > y,
        _ => false,
    }
}

/// `_merge_params`: merges each listed item into its first (the main rank's) and returns the
/// formulas.
pub(crate) fn merge_params(f: &mut Forest, need: &NeedMerge) -> Vec<String> {
    let mut info = Vec::new();
    for (key, list) in need {
        if list.len() < 2 {
            continue;
        }
        let main = list[0];
        let dtype = value(f, main, "dtype");
        for stat in STATS {
            let vals: Vec<PyVal> = list
                .iter()
                .map(|&r| value(f, r, stat).unwrap_or(PyVal::None))
                .collect();
            if vals.iter().any(|v| !is_num(&Some(v.clone()))) {
                continue;
            }
            let shown: Vec<String> = vals.iter().map(py_str).collect();
            let (merged, formula) = match stat {
                "Max" | "Min" => {
                    let mut cur = vals[0].clone();
                    for v in &vals[1..] {
                        let replace = if stat == "Max" {
                            gt(v, &cur)
                        } else {
                            gt(&cur, v)
                        };
                        if replace {
                            cur = v.clone();
                        }
                    }
                    let name = if stat == "Max" { "max" } else { "min" };
                    (cur, format!("{name}({})", shown.join(", ")))
                }
                "Mean" => {
                    let all_int = vals
                        .iter()
                        .all(|v| matches!(v, PyVal::Int(_) | PyVal::Bool(_)));
                    let mean = if all_int {
                        let s: i128 = vals
                            .iter()
                            .map(|v| number(Some(v)).unwrap_or(0.0) as i128)
                            .sum();
                        s as f64 / vals.len() as f64
                    } else {
                        let mut s = 0.0f64;
                        let mut first = true;
                        for v in &vals {
                            let x = number(Some(v)).unwrap_or(0.0);
                            if first {
                                s = x;
                                first = false;
                            } else {
                                s += x;
                            }
                        }
                        s / vals.len() as f64
                    };
                    (
                        PyVal::Float(mean),
                        format!("({}) / {}", shown.join(" + "), vals.len()),
                    )
                }
                _ => {
                    // msprobe's `pow(x, 2.0)` and `pow(s, 1 / 2.0)`: the C library's `pow`, which
                    // is not always `x * x` or `sqrt(s)` to the last bit; the compiler would
                    // replace a constant exponent by those (`py_pow`).
                    let mut s = 0.0f64;
                    for v in &vals {
                        s += py_pow(number(Some(v)).unwrap_or(0.0), 2.0);
                    }
                    let parts: Vec<String> = shown.iter().map(|v| format!("{v} ** 2")).collect();
                    (
                        PyVal::Float(py_pow(s, 0.5)),
                        format!("({}) ** 0.5", parts.join(" + ")),
                    )
                }
            };
            let merged = match merged {
                PyVal::Float(x) => PyVal::Float(cast_to_dtype(x, dtype.as_ref())),
                other => other,
            };
            let shown_final = match &merged {
                PyVal::Float(x) => float_repr(*x),
                other => other.py_str(),
            };
            let node = &mut f.nodes[main.0];
            let list_ref = if main.1 {
                &mut node.output
            } else {
                &mut node.input
            };
            if let Some((_, item)) = list_ref.get_mut(main.2) {
                item.set(stat, merged);
            }
            info.push(format!(
                "The {stat} value merging method for {key} is: {formula} = {shown_final}"
            ));
        }
    }
    info
}

impl Merger<'_> {
    /// TP groups: the `group_ranks` of each rank's first `all_reduce`/`reduce_scatter`, or
    /// Megatron's default groups when they do not fit `--tp`.
    pub(crate) fn tp_groups(
        &self,
        graphs: &[MGraph],
    ) -> Result<Vec<Vec<i64>>, crate::error::ConvertError> {
        let f = &self.forest;
        let mut groups: Vec<Vec<i64>> = Vec::new();
        for g in graphs {
            for n in g.map.values() {
                let id = &f.nodes[n].id;
                if !(id.contains("reduce_scatter") || id.contains("all_reduce")) {
                    continue;
                }
                let key = format!("{id}.input.group");
                let ranks = f.nodes[n]
                    .input
                    .iter()
                    .find(|(k, _)| *k == key)
                    .and_then(|(_, it)| it.get("group_ranks"))
                    .and_then(int_list);
                if let Some(r) = ranks {
                    if !r.is_empty() && !groups.contains(&r) {
                        groups.push(r);
                    }
                }
                break;
            }
        }
        if groups.is_empty() || groups[0].len() as i64 != self.params.tp {
            let (tp, _) = super::params::default_groups(self.params)?;
            return Ok(tp);
        }
        Ok(groups)
    }

    /// `merge_tp_graphs`: merges the graphs of one TP group into the first.
    pub(crate) fn merge_tp_graphs(
        &mut self,
        mut graphs: Vec<MGraph>,
        mapping: &[(i64, Vec<i64>)],
    ) -> Vec<MGraph> {
        if graphs.len() < 2 {
            return graphs;
        }
        let others: Vec<MGraph> = graphs.split_off(1);
        for n in graphs[0].map.values() {
            let f = &self.forest;
            let node = &f.nodes[n];
            let skip = match node.parent {
                None => true,
                Some(p) => {
                    f.nodes[p].op != NodeOp::Module
                        || UNMERGED_MODULES.contains(&f.nodes[p].id.as_str())
                        || node.id.starts_with("Distributed")
                        || !node.merge_info.is_empty()
                }
            };
            if skip {
                continue;
            }
            self.tp_matmul_reduce(n, &others, mapping);
            let other_nodes = need_merge_nodes(&self.forest, n, &others, mapping);
            let (pin, pout) = param_data_diff(&self.forest, n, &other_nodes, true);
            if !pin.is_empty() || !pout.is_empty() {
                let ranks = rank_list(&self.forest, n, &other_nodes);
                self.forest.nodes[n]
                    .merge_info
                    .push(format!("{TP_MERGED_INFO}{ranks}."));
                let mut info = merge_params(&mut self.forest, &pin);
                info.extend(merge_params(&mut self.forest, &pout));
                self.forest.nodes[n].merge_info.extend(info);
            }
        }
        for n in graphs[0].map.values() {
            self.column_row_parallel(n, &others, mapping);
        }
        graphs
    }

    /// `_handle_tp_matmul_reduce`: in a forward RowParallelLinear or backward
    /// ColumnParallelLinear, the matmul's output becomes the following reduce's output.
    fn tp_matmul_reduce(&mut self, n: usize, others: &[MGraph], mapping: &[(i64, Vec<i64>)]) {
        let f = &self.forest;
        if f.nodes[n].op != NodeOp::Module {
            return;
        }
        let splits: Vec<&str> = f.nodes[n].id.split('.').collect();
        if splits.len() < 4 {
            return;
        }
        let (dir, class) = (splits[splits.len() - 2], splits[splits.len() - 3]);
        let row = dir == "forward" && class.contains("RowParallelLinear");
        let column = dir == "backward" && class.contains("ColumnParallelLinear");
        if !row && !column {
            return;
        }
        let children = f.nodes[n].children.clone();
        let matmuls: Vec<usize> = children
            .iter()
            .copied()
            .filter(|&c| f.nodes[c].id.contains("matmul"))
            .collect();
        let mut reduces: Vec<usize> = children
            .iter()
            .copied()
            .filter(|&c| {
                let id = &f.nodes[c].id;
                id.contains("_reduce_scatter_base")
                    || id.contains("reduce_scatter_tensor")
                    || id.contains("all_reduce")
            })
            .collect();
        if matmuls.is_empty() || reduces.is_empty() {
            return;
        }
        for m in matmuls {
            if self.forest.nodes[m].output.is_empty() {
                continue;
            }
            let mo: ParamRef = (m, true, 0);
            for r in reduces.clone() {
                let f = &self.forest;
                let rn = &f.nodes[r];
                if rn.output.is_empty() {
                    continue;
                }
                let ri = if rn.id.contains("all_reduce") {
                    if rn.input.is_empty() {
                        continue;
                    }
                    (r, false, 0)
                } else {
                    if rn.input.len() < 2 {
                        continue;
                    }
                    (r, false, 1)
                };
                if !param_same(f, mo, ri, false) {
                    continue;
                }
                let other_nodes = need_merge_nodes(f, m, others, mapping);
                let (pin, _) = param_data_diff(f, m, &other_nodes, true);
                if !pin.is_empty() {
                    let ranks = rank_list(f, m, &other_nodes);
                    self.forest.nodes[m]
                        .merge_info
                        .push(format!("{TP_MERGED_INFO}{ranks}."));
                    let info = merge_params(&mut self.forest, &pin);
                    self.forest.nodes[m].merge_info.extend(info);
                }
                let (rkey, ritem) = self.forest.nodes[r].output[0].clone();
                if let Some((_, item)) = self.forest.nodes[m].output.get_mut(0) {
                    for s in STATS {
                        item.set(s, ritem.get(s).cloned().unwrap_or(PyVal::None));
                    }
                }
                let name = if rkey.is_empty() {
                    self.forest.nodes[r].id.clone()
                } else {
                    rkey
                };
                self.forest.nodes[m]
                    .merge_info
                    .push(format!("The output of this data is merged from {name}"));
                reduces.retain(|&x| x != r);
                break;
            }
        }
    }

    /// `_merge_tp_megatron_column_row_parallel`: everything from a forward
    /// ColumnParallelLinear to the next RowParallelLinear is merged unconditionally (except the
    /// column layer's input, the row layer's output and bias).
    fn column_row_parallel(&mut self, n: usize, others: &[MGraph], mapping: &[(i64, Vec<i64>)]) {
        let f = &self.forest;
        let node = &f.nodes[n];
        if node.op != NodeOp::Module || !node.merge_info.is_empty() {
            return;
        }
        let splits: Vec<&str> = node.id.split('.').collect();
        if splits.len() < 4 {
            return;
        }
        if !(splits[splits.len() - 2] == "forward"
            && splits[splits.len() - 3].contains("ColumnParallelLinear"))
        {
            return;
        }
        let Some(parent) = node.parent else {
            return;
        };
        let siblings = &f.nodes[parent].children;
        let (mut start, mut end) = (None, None);
        for (i, &s) in siblings.iter().enumerate() {
            if f.nodes[s].id.contains(node.id.as_str()) {
                start = Some(i);
            } else if f.nodes[s].id.contains("RowParallelLinear") {
                end = Some(i);
            }
        }
        let span: Vec<usize> = match (start, end) {
            (Some(s), Some(e)) if s <= e => siblings[s..=e].to_vec(),
            _ => Vec::new(),
        };
        if span.len() < 2 {
            return;
        }
        let (first, last) = (span[0], span[span.len() - 1]);
        let mut stack = span.clone();
        while let Some(cur) = stack.pop() {
            let f = &self.forest;
            stack.extend(f.nodes[cur].children.iter().rev().copied());
            if !f.nodes[cur].merge_info.is_empty() || f.nodes[cur].id.starts_with("Distributed") {
                continue;
            }
            let other_nodes = need_merge_nodes(f, cur, others, mapping);
            let (mut pin, mut pout) = param_data_diff(f, cur, &other_nodes, false);
            if pin.is_empty() && pout.is_empty() {
                continue;
            }
            let ranks = rank_list(f, cur, &other_nodes);
            let is_matmul = f.nodes[cur].id.contains("matmul");
            let up = f.nodes[cur].parent;
            if cur == first || (is_matmul && up == Some(first)) {
                remove_key(&mut pin, "input.0");
            } else if cur == last || (is_matmul && up == Some(last)) {
                pout.clear();
                remove_key(&mut pin, "parameters.bias");
            }
            self.forest.nodes[cur]
                .merge_info
                .push(format!("{TP_MERGED_INFO}{ranks}."));
            let mut info = merge_params(&mut self.forest, &pin);
            info.extend(merge_params(&mut self.forest, &pout));
            self.forest.nodes[cur].merge_info.extend(info);
        }
    }
}

/// `[0, 1]`: the ranks of a node and of its counterparts.
fn rank_list(f: &Forest, n: usize, others: &[usize]) -> String {
    let mut r = vec![f.nodes[n].rank.to_string()];
    r.extend(others.iter().map(|&o| f.nodes[o].rank.to_string()));
    format!("[{}]", r.join(", "))
}

/// `_get_need_merge_node`: the same node on every other graph, under the same ancestors
/// (through the TP rank mapping for ids already marked `_rank<N>` by a PP merge).
pub(crate) fn need_merge_nodes(
    f: &Forest,
    n: usize,
    others: &[MGraph],
    mapping: &[(i64, Vec<i64>)],
) -> Vec<usize> {
    let id = &f.nodes[n].id;
    let mut out = Vec::new();
    let marked = rank_mark(id);
    match marked {
        Some(rank) if !mapping.is_empty() => {
            let Some((_, targets)) = mapping.iter().find(|(r, _)| *r == rank) else {
                return out;
            };
            if targets.len() != others.len() {
                return out;
            }
            for (g, &t) in others.iter().zip(targets) {
                let tid = rank_sub_all(id, t);
                match g.map.get(&tid) {
                    Some(o) if f.ancestors(n) == f.ancestors(o) => out.push(o),
                    _ => return Vec::new(),
                }
            }
        }
        _ => {
            for g in others {
                match g.map.get(id) {
                    Some(o) if f.ancestors(n) == f.ancestors(o) => out.push(o),
                    _ => return Vec::new(),
                }
            }
        }
    }
    out
}

/// A `group_ranks` value as integers.
fn int_list(v: &PyVal) -> Option<Vec<i64>> {
    match v {
        PyVal::List(l) => l
            .iter()
            .map(|x| match x {
                PyVal::Int(i) => Some(*i),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_like_torch() {
        let d = |s: &str| PyVal::Str(s.into());
        let v = -6.821210263296965e-13;
        assert_eq!(
            float_repr(cast_to_dtype(v, Some(&d("torch.float32")))),
            float_repr((v as f32) as f64)
        );
        assert_eq!(cast_to_dtype(1.00390625, Some(&d("torch.bfloat16"))), 1.0);
        assert_eq!(cast_to_dtype(0.1, Some(&d("torch.float64"))), 0.1);
        assert!(cast_to_dtype(f64::NAN, Some(&d("torch.float32"))).is_nan());
    }
}
