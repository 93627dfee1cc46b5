//! Graphs → `tb_nodes` / `tb_stack` / `tb_config` rows, as msprobe exports them.
//!
//! `node_order` is the post-order index; stacks are de-duplicated per graph in that order
//! (`stack_id = <graph_id>_<k>`); JSON columns are written with Python's `json.dumps` layout.

use graph_ascend_dump::FastMap;

use graph_ascend_visdb::writer::{ConfigRow, NodeRow};
use serde_json::json;

use std::borrow::Cow;

use crate::compare::{self, CompareMode};
use crate::error::ConvertError;
use crate::format::{node_data_json, FormatOptions};
use crate::graph::Graph;
use crate::pyjson;
use crate::rank_dump::RankDump;

/// Where a graph's rows go.
pub struct ExportContext {
    pub data_source: &'static str,
    pub step: i64,
    pub rank: i64,
    pub dump_data_dir: Option<String>,
    pub keep_md5: bool,
    /// The graph's rows carry their comparison with the graph that follows it in the list
    /// written (its golden partner), made as the rows are ([`crate::compare::compared_items`]);
    /// `None`: the rows are the graph's items as they are.
    pub compare_with_next: Option<CompareMode>,
}

impl ExportContext {
    /// The rows of a graph built from `dump`, on side `data_source` of step `step`, rank `rank`.
    pub fn of(
        dump: &RankDump,
        data_source: &'static str,
        step: i64,
        rank: i64,
        keep_md5: bool,
    ) -> ExportContext {
        ExportContext {
            data_source,
            step,
            rank,
            dump_data_dir: dump.tensor_dir(),
            keep_md5,
            compare_with_next: None,
        }
    }
}

/// The rows of one graph in export order: post-order node indexes, each node's `stack_id`, and
/// the distinct stacks `(stack_id, text)` in first-use order. Cheap and sequential; the rows
/// themselves are made by [`node_row`], which can run in parallel.
pub struct GraphPlan {
    pub graph_id: String,
    pub order: Vec<usize>,
    /// The stack of `order[k]`: its place in `stacks`, its `stack_id` `<graph_id>_<place>`
    /// ([`GraphPlan::stack_id`]; 4 bytes a row, where the id's `Arc<str>` took 16).
    pub stack_ids: Vec<u32>,
    pub stacks: Vec<(String, String)>,
}

impl GraphPlan {
    /// The `stack_id` of `order[k]`.
    pub fn stack_id(&self, k: usize) -> String {
        let place = self.stack_ids.get(k).copied().unwrap_or_default();
        format!("{}_{place}", self.graph_id)
    }
}

/// Orders one graph's rows and de-duplicates its stacks: stacks shared by several nodes (new
/// stack.json format) are printed once; equal stacks of different nodes get one id.
pub fn plan_graph(g: &Graph, ctx: &ExportContext) -> GraphPlan {
    let graph_id = format!("{}_{}_{}", ctx.data_source, ctx.step, ctx.rank);
    let mut by_text: FastMap<String, u32> = FastMap::default();
    let mut by_ptr: FastMap<*const Vec<String>, u32> = FastMap::default();
    let mut stacks = Vec::new();
    let order = g.post_order();
    let mut stack_ids = Vec::with_capacity(order.len());
    for &n in &order {
        let node = &g.nodes[n];
        let ptr = std::sync::Arc::as_ptr(&node.stack);
        let id = match by_ptr.get(&ptr) {
            Some(&id) => id,
            None => {
                let text = pyjson::str_list(&node.stack);
                let id = match by_text.get(&text) {
                    Some(&id) => id,
                    None => {
                        // Fewer stacks than nodes, and nodes are numbered by `u32`.
                        let id = u32::try_from(stacks.len()).unwrap_or(u32::MAX);
                        stacks.push((format!("{graph_id}_{id}"), text.clone()));
                        by_text.insert(text, id);
                        id
                    }
                };
                by_ptr.insert(ptr, id);
                id
            }
        };
        stack_ids.push(id);
    }
    GraphPlan {
        graph_id,
        order,
        stack_ids,
        stacks,
    }
}

/// The `tb_nodes` row of the `k`-th node of a plan; `partner`: the graph that follows `g` in the
/// list written (read when `ctx.compare_with_next` is set).
pub fn node_row(
    g: &Graph,
    ctx: &ExportContext,
    plan: &GraphPlan,
    k: usize,
    partner: Option<&Graph>,
) -> Result<NodeRow, ConvertError> {
    let n = plan.order[k];
    let node = &g.nodes[n];
    let id = g.id(n);
    let compared = match (ctx.compare_with_next, partner) {
        (Some(mode), Some(bench)) => compare::compared_items(mode, g, n, bench)?,
        _ => None,
    };
    let (input, output) = match &compared {
        Some(((i, o), _)) => (Cow::Borrowed(i.as_slice()), Cow::Borrowed(o.as_slice())),
        None => g.items(n)?,
    };
    let precision_index = match &compared {
        Some((_, p)) => Some(*p),
        None => node.precision_index(),
    };
    let graph_id = &plan.graph_id;
    let children = g.children(n);
    let sub_nodes = if children.len() == 0 {
        String::new()
    } else {
        let mut s = String::with_capacity(children.len() * 48);
        s.push('[');
        for (i, c) in children.enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            pyjson::push_str(&mut s, g.id(c));
        }
        s.push(']');
        s
    };
    let fmt = FormatOptions {
        keep_md5: ctx.keep_md5,
        batch_p2p: id.contains("batch_isend_irecv"),
        twice: false,
    };
    let twice = node.formatted_twice();
    Ok(NodeRow {
        id: format!("{graph_id}_{id}"),
        graph_id: graph_id.clone(),
        node_order: k as i64,
        node_name: id.to_string(),
        node_type: (node.op as i32).to_string(),
        up_node: node
            .parent()
            .map(|p| g.id(p).to_string())
            .unwrap_or_default(),
        sub_nodes,
        precision_index,
        overflow_level: node.overflow_level().map(str::to_string),
        micro_step_id: node.micro_step_id().unwrap_or(0),
        matched_node_link: if node.matched_link_is_path {
            let mut path = g.ancestors(n);
            path.push(id.to_string());
            pyjson::str_list(&path)
        } else {
            pyjson::str_list(node.matched_link())
        },
        stack_id: plan.stack_id(k),
        parallel_merge_info: if node.parallel_merge_info().is_empty() {
            String::new()
        } else {
            pyjson::str_list(node.parallel_merge_info())
        },
        matched_distributed: "{}".into(),
        modified: 0,
        input_data: node_data_json(
            &input,
            FormatOptions {
                twice: twice.input,
                ..fmt
            },
        ),
        output_data: node_data_json(
            &output,
            FormatOptions {
                twice: twice.output,
                ..fmt
            },
        ),
        data_source: ctx.data_source.to_string(),
        dump_data_dir: ctx.dump_data_dir.clone(),
        step: ctx.step,
        rank: ctx.rank,
        is_distributed: i64::from(id.starts_with("Distributed")),
    })
}

const UNMATCHED: (&str, &str) = ("比对过程中节点未匹配上", "unmatched node");

/// The `tb_config` row.
pub fn config_row(
    compare: bool,
    task: &str,
    micro_steps: i64,
    overflow_check: bool,
    ranks: &[i64],
    steps: &[i64],
) -> ConfigRow {
    let (tool_tip, node_colors) = if compare {
        // msprobe's tensor-mode tips: every metric named, every text empty (its page no longer
        // shows them); a structure-only compare gets them too (its mode adapter's default).
        let tensor_tip = || {
            json!({"Cosine": "", "EucDist": "", "MaxAbsErr": "", "MaxRelativeErr": "",
                   "One Thousandth Err Ratio": "", "Five Thousandths Err Ratio": ""})
        };
        let unmatched =
            json!({"value": [], "description": UNMATCHED.0, "accuracy_level": UNMATCHED.1});
        let (tip, colors) = match task {
            // No precision: only the unmatched colour.
            "structure" => (tensor_tip(), json!({ "#C7C7C7": unmatched })),
            _ => {
                let (tip, pass, other) = match task {
                    "md5" => (
                        json!({"md5": "数据MD5信息，用于比较两个数据信息是否完全一致"}),
                        "与标杆相比, 此节点所有输入输出的md5值相同",
                        "与标杆相比, 此节点任意输入输出的md5值不同",
                    ),
                    "all" => (
                        tensor_tip(),
                        "此节点所有输入输出的 tensor 误差, 颜色越深代表调试侧与标杆侧的偏差越大",
                        "此节点所有输入输出的 tensor 误差, 颜色越深代表调试侧与标杆侧的偏差越大",
                    ),
                    _ => (
                        json!({"Max diff": "NPU与标杆API统计信息比对，最大值的差值",
                               "Min diff": "NPU与标杆API统计信息比对，最小值的差值",
                               "Mean diff": "NPU与标杆API统计信息比对，平均值的差值",
                               "L2norm diff": "NPU与标杆API统计信息比对，2范数（平方根）的差值"}),
                        "此节点所有输入输出的统计量误差, 颜色越深代表调试侧与标杆侧的偏差越大",
                        "此节点所有输入输出的统计量误差, 颜色越深代表调试侧与标杆侧的偏差越大",
                    ),
                };
                let colors = json!({
                    "#FFFCF3": {"value": [0, 0.3], "description": pass, "accuracy_level": "pass"},
                    "#FFDC7F": {"value": [0.3, 0.6], "description": other, "accuracy_level": "warning"},
                    "#FF704D": {"value": [0.6, 1], "description": other, "accuracy_level": "error"},
                    "#C7C7C7": unmatched,
                });
                (tip, colors)
            }
        };
        (Some(pyjson::value(&tip)), pyjson::value(&colors))
    } else {
        (None, "null".to_string())
    };
    let ints = |v: &[i64]| {
        let parts: Vec<String> = v.iter().map(i64::to_string).collect();
        format!("[{}]", parts.join(", "))
    };
    ConfigRow {
        graph_type: if compare { "compare" } else { "build" }.into(),
        task: task.to_string(),
        tool_tip,
        micro_steps,
        overflow_check: i64::from(overflow_check),
        node_colors,
        rank_list: ints(ranks),
        step_list: ints(steps),
    }
}
