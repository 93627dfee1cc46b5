//! Synthetic `.vis.db` files of any size, for the tests of the store and the service and for
//! the service and diagnosis benchmarks (`gen_visdb`, `src/bin/gen_visdb.rs`).
//!
//! The model is a transformer-like hierarchy: `DefaultModel` → `layers` blocks → `modules`
//! sub-modules each → `leaves` API calls each, written with the real
//! [`graph_ascend_visdb::writer`] so the schema, row formats and indexes are exactly what the
//! converter produces. Precision indexes come from a fixed pseudo-random sequence, so two runs
//! give the same file. A file may hold the graphs of several steps and ranks (each the same
//! shape), as a gathered run's file does.

use std::path::{Path, PathBuf};

use serde_json::json;

use graph_ascend_visdb::writer::{ConfigRow, NodeRow, VisDbWriter, WriteError};

/// The shape of a synthetic graph.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub layers: usize,
    pub modules: usize,
    pub leaves: usize,
    /// Write a golden side too (a compare file) with every node matched.
    pub compare: bool,
    /// Steps `0..steps` and ranks `0..ranks`: one graph (a side) per pair.
    pub steps: usize,
    pub ranks: usize,
}

impl Shape {
    /// A shape with about `nodes` nodes per side and `leaves` API calls per module.
    pub fn with_nodes(nodes: usize, leaves: usize, compare: bool) -> Shape {
        let modules = 10;
        let per_layer = 1 + modules * (1 + leaves);
        Shape {
            layers: (nodes / per_layer).max(1),
            modules,
            leaves,
            compare,
            steps: 1,
            ranks: 1,
        }
    }

    /// This shape repeated over `steps` steps and `ranks` ranks (at least one of each).
    pub fn with_graphs(self, steps: usize, ranks: usize) -> Shape {
        Shape {
            steps: steps.max(1),
            ranks: ranks.max(1),
            ..self
        }
    }

    /// Nodes per side of one graph.
    pub fn nodes_per_side(&self) -> usize {
        1 + self.layers * (1 + self.modules * (1 + self.leaves))
    }
}

/// A small deterministic generator (xorshift), enough to spread precision indexes.
struct Sequence(u64);

impl Sequence {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Writes a synthetic file to `dest` and returns its path.
pub fn write(dest: &Path, shape: Shape) -> Result<PathBuf, WriteError> {
    let mut writer = VisDbWriter::create(dest)?;
    let sides: &[&str] = if shape.compare {
        &["NPU", "Bench"]
    } else {
        &["NPU"]
    };
    for step in 0..shape.steps {
        for rank in 0..shape.ranks {
            for side in sides {
                write_graph(&mut writer, shape, side, step, rank)?;
            }
        }
    }
    writer.insert_config(&ConfigRow {
        graph_type: if shape.compare { "compare" } else { "build" }.to_owned(),
        task: "summary".to_owned(),
        tool_tip: Some("{}".to_owned()),
        micro_steps: 1,
        overflow_check: 0,
        node_colors: json!({
            "#FFFCF3": {"value": [0, 0.3], "description": "pass", "accuracy_level": "pass"},
            "#FFDC7F": {"value": [0.3, 0.6], "description": "warning", "accuracy_level": "warning"},
            "#FF704D": {"value": [0.6, 1], "description": "error", "accuracy_level": "error"},
            "#C7C7C7": {"value": [], "description": "unmatched", "accuracy_level": "unmatched node"}
        })
        .to_string(),
        rank_list: json!((0..shape.ranks).collect::<Vec<_>>()).to_string(),
        step_list: json!((0..shape.steps).collect::<Vec<_>>()).to_string(),
    })?;
    writer.finish()
}

/// Writes the graph of one side, step and rank.
fn write_graph(
    writer: &mut VisDbWriter,
    shape: Shape,
    side: &str,
    step: usize,
    rank: usize,
) -> Result<(), WriteError> {
    let mut seq = Sequence(0x9E37_79B9_7F4A_7C15);
    let mut rows = Vec::with_capacity(shape.nodes_per_side());
    let graph_id = format!("{side}_{step}_{rank}");
    let mut order = 0i64;
    let mut push = |rows: &mut Vec<NodeRow>,
                    name: String,
                    node_type: &str,
                    up: &str,
                    subs: Vec<String>,
                    precision: Option<f64>,
                    data: (String, String)| {
        let link = if shape.compare {
            json!([up, name]).to_string()
        } else {
            "[]".to_owned()
        };
        rows.push(NodeRow {
            id: format!("{graph_id}_{name}"),
            graph_id: graph_id.clone(),
            node_order: order,
            node_type: node_type.to_owned(),
            up_node: up.to_owned(),
            sub_nodes: if subs.is_empty() {
                String::new()
            } else {
                json!(subs).to_string()
            },
            precision_index: if side == "NPU" && shape.compare {
                precision
            } else {
                None
            },
            overflow_level: None,
            micro_step_id: 0,
            matched_node_link: link,
            stack_id: format!("{graph_id}_0"),
            parallel_merge_info: String::new(),
            matched_distributed: "{}".to_owned(),
            modified: 0,
            input_data: data.0,
            output_data: data.1,
            data_source: side.to_owned(),
            dump_data_dir: None,
            step: step as i64,
            rank: rank as i64,
            is_distributed: 0,
            node_name: name,
        });
        order += 1;
    };
    let root = "DefaultModel".to_owned();
    let mut layer_names = Vec::new();
    let mut call = 0usize;
    for l in 0..shape.layers {
        let layer = format!("Module.layers.{l}.Block.forward.0");
        let mut module_names = Vec::new();
        for m in 0..shape.modules {
            let module = format!("Module.layers.{l}.block{m}.Linear.forward.0");
            let mut leaf_names = Vec::new();
            for _ in 0..shape.leaves {
                let leaf = format!("Functional.linear.{call}.forward");
                call += 1;
                let precision = match seq.next() % 100 {
                    0..=89 => Some(0.0),
                    90..=97 => Some(0.5),
                    _ => Some(1.0),
                };
                let data = tensor_data(&leaf, seq.next());
                push(
                    &mut rows,
                    leaf.clone(),
                    "1",
                    &module,
                    Vec::new(),
                    precision,
                    data,
                );
                leaf_names.push(leaf);
            }
            push(
                &mut rows,
                module.clone(),
                "0",
                &layer,
                leaf_names,
                Some(0.0),
                ("{}".into(), "{}".into()),
            );
            module_names.push(module);
        }
        push(
            &mut rows,
            layer.clone(),
            "0",
            &root,
            module_names,
            Some(0.0),
            ("{}".into(), "{}".into()),
        );
        layer_names.push(layer);
    }
    push(
        &mut rows,
        root.clone(),
        "0",
        "",
        layer_names,
        None,
        ("{}".into(), "{}".into()),
    );
    writer.insert_nodes(&rows)?;
    let stack = json!(["File \"train.py\", line 1, in <module>, model(x)"]).to_string();
    let stack_id = format!("{graph_id}_0");
    writer.insert_stacks([(stack_id.as_str(), stack.as_str())])?;
    Ok(())
}

/// The name of level `i` (0: the root's only child) of a [`write_chain`] file.
pub fn chain_node(i: usize) -> String {
    format!("Module.deep.{i}.Deep.forward.0")
}

/// Writes a build file whose root `DefaultModel` holds a chain of `depth` modules, each the only
/// child of the one before ([`chain_node`] names them): the deepest hierarchy a crafted file can
/// make with the fewest rows.
pub fn write_chain(dest: &Path, depth: usize) -> Result<PathBuf, WriteError> {
    let mut writer = VisDbWriter::create(dest)?;
    let graph_id = "NPU_0_0";
    let rows: Vec<NodeRow> = (0..=depth)
        .map(|level| {
            // Level 0 is the root, level `l` the chain's node `l - 1`.
            let name = |l: usize| {
                if l == 0 {
                    "DefaultModel".to_owned()
                } else {
                    chain_node(l - 1)
                }
            };
            let node_name = name(level);
            NodeRow {
                id: format!("{graph_id}_{node_name}"),
                graph_id: graph_id.to_owned(),
                node_order: level as i64,
                node_type: "0".to_owned(),
                up_node: if level == 0 {
                    String::new()
                } else {
                    name(level - 1)
                },
                sub_nodes: if level == depth {
                    String::new()
                } else {
                    json!([name(level + 1)]).to_string()
                },
                precision_index: None,
                overflow_level: None,
                micro_step_id: 0,
                matched_node_link: "[]".to_owned(),
                stack_id: format!("{graph_id}_0"),
                parallel_merge_info: String::new(),
                matched_distributed: "{}".to_owned(),
                modified: 0,
                input_data: "{}".to_owned(),
                output_data: "{}".to_owned(),
                data_source: "NPU".to_owned(),
                dump_data_dir: None,
                step: 0,
                rank: 0,
                is_distributed: 0,
                node_name,
            }
        })
        .collect();
    writer.insert_nodes(&rows)?;
    writer.insert_config(&ConfigRow {
        graph_type: "build".to_owned(),
        task: "summary".to_owned(),
        tool_tip: Some("{}".to_owned()),
        micro_steps: 1,
        overflow_check: 0,
        node_colors: "{}".to_owned(),
        rank_list: "[0]".to_owned(),
        step_list: "[0]".to_owned(),
    })?;
    writer.finish()
}

fn tensor_data(name: &str, seed: u64) -> (String, String) {
    let v = (seed % 10_000) as f64 / 1000.0;
    let stats = |slot: &str| {
        json!({
            format!("{name}.{slot}.0"): {
                "type": "torch.Tensor", "dtype": "torch.float32", "shape": "[8, 64]",
                "Max": format!("{v}"), "Min": format!("{}", -v), "Mean": "0.01", "Norm": format!("{}", v * 3.0),
                "requires_grad": "True", "data_name": "-1",
                "Max diff": "0.0", "Min diff": "0.0", "Mean diff": "0.0", "L2norm diff": "0.0",
                "MaxRelativeErr": "0.0%", "MinRelativeErr": "0.0%", "MeanRelativeErr": "0.0%", "NormRelativeErr": "0.0%"
            }
        })
        .to_string()
    };
    (stats("input"), stats("output"))
}
