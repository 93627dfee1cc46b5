//! Synthetic msprobe dumps of any size: the converter's memory and sharding tests, the converter
//! and scale benchmarks (`gen_dump`, `src/bin/gen_dump.rs`).
//!
//! [`write`] writes `OUT/step<s>/rank<r>/{dump,construct,stack}.json` (one rank and one step by
//! default) shaped like a real PyTorch `mix`-level statistics dump: per layer a `Block` module with
//! a `Linear` sub-module (its `Functional.linear` call and parameters), a `Functional.relu`, their
//! backward twins and the Linear's `parameters_grad`; [`DumpShape::perturb`] shifts some
//! statistics so a compare run has real differences to grade. With several ranks, each rank also
//! starts with communication ops shaped as msprobe dumps them: a ring `send` to the next rank and
//! `recv` from the previous one (links between far-apart ranks, so across shards) and an
//! `all_reduce` in its group of 8 ranks. Output is streamed, so memory stays flat.

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
    }
}

fn tensor(out: &mut String, rng: &mut Rng, shape: &[usize], scale: f64, grad: bool) {
    let max = rng.next() * scale + 0.1;
    let min = -rng.next() * scale - 0.1;
    let mean = (rng.next() - 0.5) * scale * 0.1;
    let norm = rng.next() * scale * 10.0 + 1.0;
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let _ = write!(
        out,
        "{{\"type\": \"torch.Tensor\", \"dtype\": \"torch.float32\", \"shape\": [{}], \"Max\": {max:?}, \"Min\": {min:?}, \"Mean\": {mean:?}, \"Norm\": {norm:?}, \"requires_grad\": {grad}}}",
        dims.join(", ")
    );
}

/// What [`write`] generates.
#[derive(Debug, Clone, Copy)]
pub struct DumpShape {
    /// Entries of each rank's `dump.json` (rounded up to whole layers of 9).
    pub entries: usize,
    /// Shift some statistics (every 7th layer's), so that a compare against the unperturbed
    /// dump has differences to grade.
    pub perturb: bool,
    /// Ranks `0..ranks` (at least one); with more than one, each starts with its communication
    /// ops.
    pub ranks: usize,
    /// Steps `0..steps` (at least one).
    pub steps: usize,
}

impl DumpShape {
    /// One rank of one step with about `entries` entries, unperturbed.
    pub fn new(entries: usize) -> DumpShape {
        DumpShape {
            entries,
            perturb: false,
            ranks: 1,
            steps: 1,
        }
    }
}

/// Writes the dump folders of `shape` under `out` (`out/step<s>/rank<r>/`); returns each rank
/// folder written, with its number of entries.
pub fn write(out: &Path, shape: DumpShape) -> std::io::Result<Vec<(PathBuf, usize)>> {
    let ranks = shape.ranks.max(1);
    let mut written = Vec::new();
    for step in 0..shape.steps.max(1) {
        for rank in 0..ranks {
            let dir = out.join(format!("step{step}")).join(format!("rank{rank}"));
            let entries = write_rank(&dir, shape.entries, shape.perturb, rank, ranks)?;
            written.push((dir, entries));
        }
    }
    Ok(written)
}

/// The ranks of `rank`'s all_reduce group: the 8 (or fewer, at the end) around it.
const GROUP: usize = 8;

/// One rank folder; `rank` of `ranks` (communication ops when `ranks > 1`). Returns the number of
/// entries written besides the communication ops.
fn write_rank(
    dir: &Path,
    entries: usize,
    perturb: bool,
    rank: usize,
    ranks: usize,
) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let per_layer = 9;
    let layers = entries.div_ceil(per_layer).max(1);
    let mut dump = std::io::BufWriter::new(std::fs::File::create(dir.join("dump.json"))?);
    let mut construct = std::io::BufWriter::new(std::fs::File::create(dir.join("construct.json"))?);
    let mut stack = std::io::BufWriter::new(std::fs::File::create(dir.join("stack.json"))?);
    writeln!(
        dump,
        "{{\"task\": \"statistics\", \"level\": \"mix\", \"framework\": \"pytorch\", \"dump_data_dir\": null, \"data\": {{"
    )?;
    construct.write_all(b"{")?;
    stack.write_all(b"{")?;
    let mut first = true;
    let mut rng = Rng(42 + rank as u64);
    let mut stack_idx = 0usize;
    if ranks > 1 {
        let lo = rank / GROUP * GROUP;
        let group: Vec<String> = (lo..(lo + GROUP).min(ranks))
            .map(|r| r.to_string())
            .collect();
        let comm = [
            ("Distributed.send.0.forward", format!("\"dst\": {{\"type\": \"int\", \"value\": {}}}", (rank + 1) % ranks)),
            ("Distributed.recv.0.forward", format!("\"src\": {{\"type\": \"int\", \"value\": {}}}", (rank + ranks - 1) % ranks)),
            ("Distributed.all_reduce.0.forward", format!(
                "\"group\": {{\"type\": \"torch.ProcessGroup\", \"group_ranks\": [{}], \"group_id\": \"g{}\"}}",
                group.join(", "),
                lo / GROUP
            )),
        ];
        for (name, kwargs) in comm {
            let mut e = String::with_capacity(512);
            e.push_str("{\"input_args\": [");
            tensor(&mut e, &mut rng, &[8, 64], 1.0, false);
            let _ = write!(e, "], \"input_kwargs\": {{{kwargs}}}, \"output\": [");
            tensor(&mut e, &mut rng, &[8, 64], 1.0, false);
            e.push_str("]}");
            let sep = if first { "" } else { ", " };
            write!(dump, "{sep}\"{name}\": {e}")?;
            write!(construct, "{sep}\"{name}\": null")?;
            write!(
                stack,
                "{sep}\"{stack_idx}\": [[\"{name}\"], [\"File /home/user/train/model.py, line 5, in step, \\n dist.op(x)\"]]"
            )?;
            stack_idx += 1;
            first = false;
        }
    }
    for l in 0..layers {
        let scale = if perturb && l % 7 == 3 { 1.5 } else { 1.0 };
        let block_f = format!("Module.layers.{l}.Block.forward.0");
        let lin_f = format!("Module.layers.{l}.fc.Linear.forward.0");
        let api_f = format!("Functional.linear.{l}.forward");
        let relu_f = format!("Functional.relu.{l}.forward");
        let block_b = format!("Module.layers.{l}.Block.backward.0");
        let lin_b = format!("Module.layers.{l}.fc.Linear.backward.0");
        let api_b = format!("Functional.linear.{l}.backward");
        let relu_b = format!("Functional.relu.{l}.backward");
        let grad = format!("Module.layers.{l}.fc.Linear.parameters_grad");
        let nodes: [(&str, Option<&str>, &str); 9] = [
            (&api_f, Some(&lin_f), "fwd_api"),
            (&lin_f, Some(&block_f), "fwd_mod"),
            (&relu_f, Some(&block_f), "fwd_api"),
            (&block_f, None, "fwd_mod"),
            (&relu_b, Some(&block_b), "bwd"),
            (&api_b, Some(&lin_b), "bwd"),
            (&lin_b, Some(&block_b), "bwd"),
            (&block_b, None, "bwd"),
            (&grad, None, "grad"),
        ];
        for (name, parent, kind) in nodes {
            let mut e = String::with_capacity(1024);
            match kind {
                "grad" => {
                    e.push_str("{\"weight\": [");
                    tensor(&mut e, &mut rng, &[64, 64], scale, false);
                    e.push_str("], \"bias\": [");
                    tensor(&mut e, &mut rng, &[64], scale, false);
                    e.push_str("]}");
                }
                "bwd" => {
                    e.push_str("{\"input\": [");
                    tensor(&mut e, &mut rng, &[8, 64], scale, false);
                    e.push_str("], \"output\": [");
                    tensor(&mut e, &mut rng, &[8, 64], scale, false);
                    e.push_str("]}");
                }
                _ => {
                    e.push_str("{\"input_args\": [");
                    tensor(&mut e, &mut rng, &[8, 64], scale, true);
                    e.push_str("], \"input_kwargs\": {\"inplace\": {\"type\": \"bool\", \"value\": false}}, \"output\": [");
                    tensor(&mut e, &mut rng, &[8, 64], scale, true);
                    e.push(']');
                    if kind == "fwd_mod" {
                        e.push_str(", \"parameters\": {\"weight\": ");
                        tensor(&mut e, &mut rng, &[64, 64], scale, true);
                        e.push('}');
                    }
                    e.push('}');
                }
            }
            let sep = if first { "" } else { ", " };
            write!(dump, "{sep}\"{name}\": {e}")?;
            if kind != "grad" {
                let p = parent.map_or("null".to_string(), |p| format!("\"{p}\""));
                write!(construct, "{sep}\"{name}\": {p}")?;
                write!(
                    stack,
                    "{sep}\"{stack_idx}\": [[\"{name}\"], [\"File /home/user/train/model.py, line {}, in forward, \\n x = self.layer(x)\"]]",
                    10 + l % 50
                )?;
                stack_idx += 1;
            }
            first = false;
        }
    }
    dump.write_all(b"}}\n")?;
    construct.write_all(b"}\n")?;
    stack.write_all(b"}\n")?;
    dump.flush()?;
    construct.flush()?;
    stack.flush()?;
    Ok(layers * per_layer)
}
