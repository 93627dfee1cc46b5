//! A rank folder read ([`RankDump`]): its three files (`dump.json`, `construct.json`,
//! `stack.json`). For a graph, the two small files are read and the graph's skeleton made
//! first, then dump.json, its entries placed on their nodes as they are read (the read and
//! build step of a conversion, [`crate::stage::build`]).

use std::path::{Path, PathBuf};

use graph_ascend_dump::{Confine, Construct, DumpFile, StackMap};

use crate::dump_ops::DumpOps;
use crate::entries::{DumpSource, EntrySpan};
use crate::error::ConvertError;
use crate::graph::{Graph, Skeleton};
use crate::timing;

/// A rank folder read from disk.
pub struct RankDump {
    pub dir: PathBuf,
    /// dump.json's header (task, framework, …); its entries are in `ops`.
    pub dump: DumpFile,
    pub ops: DumpOps,
    pub construct: Construct,
    pub stacks: StackMap,
    /// Where the folder's files may be read from (its tensors, and again by layer mapping).
    pub confine: Confine,
}

impl RankDump {
    /// Reads the three mandatory files of a rank folder (overflow levels under `overflow_check`),
    /// wherever they are.
    pub fn read(dir: &Path, overflow_check: bool) -> Result<RankDump, ConvertError> {
        let confine = Confine::anywhere();
        let [dump_p, construct_p, stack_p] = rank_files(dir)?;
        let (dump_side, (construct, stacks)) = rayon::join(
            || {
                DumpOps::read_with(
                    &dump_p,
                    &confine,
                    overflow_check,
                    false,
                    &mut |_, _| false,
                    &|_| true,
                )
            },
            || {
                rayon::join(
                    || Construct::read(&construct_p, &confine),
                    || StackMap::read(&stack_p, &confine),
                )
            },
        );
        let construct = construct?;
        let (dump, ops) = dump_side?;
        Ok(RankDump {
            dir: dir.to_path_buf(),
            dump,
            ops,
            construct,
            stacks: stacks?,
            confine,
        })
    }

    /// [`RankDump::read`] and the folder's graph: its skeleton is made from construct.json and
    /// stack.json before dump.json is read, then the items are attached.
    pub fn read_and_build(
        dir: &Path,
        overflow_check: bool,
    ) -> Result<(RankDump, Graph), ConvertError> {
        RankDump::read_and_build_counted(
            dir,
            &Confine::anywhere(),
            overflow_check,
            false,
            true,
            &|_| true,
        )
    }

    /// [`RankDump::read_and_build`] telling `on_bytes` how many more bytes of the folder's
    /// files were read, as they are (dump.json batch by batch); an answer `false` stops the
    /// reading with [`ConvertError::Cancelled`]. With `spans`, the graph keeps where its nodes'
    /// entries lie in dump.json instead of their items (see [`crate::entries`]). Without
    /// `keep_construct`, the returned `construct` is empty: the hierarchy is freed as soon as
    /// the skeleton holds it, not once dump.json is read.
    pub(crate) fn read_and_build_counted(
        dir: &Path,
        confine: &Confine,
        overflow_check: bool,
        spans: bool,
        keep_construct: bool,
        on_bytes: &(dyn Fn(u64) -> bool + Sync),
    ) -> Result<(RankDump, Graph), ConvertError> {
        let (mut dump, skeleton) = RankDump::read_parts(
            dir,
            confine,
            overflow_check,
            spans,
            keep_construct,
            on_bytes,
        )?;
        let p = timing::phase(|| format!("attach items {}", dir.display()));
        let mut graph = skeleton.attach(&mut dump.ops, &dump.stacks, &dump.dump.framework);
        if graph.nodes.iter().any(|n| n.entry.is_some()) {
            graph.source = Some(std::sync::Arc::new(DumpSource::open(
                &dump.dump.path,
                &dump.confine,
            )?));
        }
        p.done();
        Ok((dump, graph))
    }

    /// The three files, and the graph's skeleton made before dump.json is read, so that every
    /// entry is placed on its node as it is read and no entry is ever held by its name; the
    /// hierarchy is made before stack.json is read, so that each node takes its frames as they
    /// are read and no map of stack.json is held either. construct.json's
    /// entries are freed once the hierarchy holds them, before stack.json is read, unless
    /// `keep_construct`.
    fn read_parts(
        dir: &Path,
        confine: &Confine,
        overflow_check: bool,
        spans: bool,
        keep_construct: bool,
        on_bytes: &(dyn Fn(u64) -> bool + Sync),
    ) -> Result<(RankDump, Skeleton), ConvertError> {
        let [dump_p, construct_p, stack_p] = rank_files(dir)?;
        // A cancel is seen by dump.json's reader, batch by batch: the small files' bytes are
        // only counted.
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        let p = timing::phase(|| format!("skeleton {}", dir.display()));
        let read = timing::phase(|| format!("  construct.json {}", dir.display()));
        let mut construct = Construct::read(&construct_p, confine)?;
        let _ = on_bytes(size(&construct_p));
        read.done();
        let made = timing::phase(|| format!("  hierarchy {}", dir.display()));
        let mut sk = Graph::hierarchy(&construct);
        if !keep_construct {
            construct = Construct::default();
        }
        made.done();
        // Only the parameter gradients' stacks are kept apart: the nodes that the items add
        // (`Skeleton::attach`) look them up.
        let stacks = sk
            .read_stacks(&stack_p, confine)
            .map(|()| sk.take_parameters_grad_stacks());
        let _ = on_bytes(size(&stack_p));
        p.done();
        // A bad stack.json is told after dump.json's own error, as when the files were read
        // together.
        let read = timing::phase(|| format!("dump.json {}", dir.display()));
        let mut place = |name: &str, span: EntrySpan| stacks.is_ok() && sk.place(name, span);
        let (dump, ops) = DumpOps::read_with(
            &dump_p,
            confine,
            overflow_check,
            spans,
            &mut place,
            on_bytes,
        )?;
        read.done();
        let dump = RankDump {
            dir: dir.to_path_buf(),
            dump,
            ops,
            construct,
            stacks: stacks?,
            confine: confine.clone(),
        };
        Ok((dump, sk))
    }

    /// The tensor folder msprobe records in `dump_data_dir` (`None` for statistics dumps):
    /// the recorded one when it is this rank folder's, else `<rank folder>/dump_tensor_data`
    /// (dumps moved to another place).
    pub fn tensor_dir(&self) -> Option<String> {
        let d = self
            .dump
            .dump_data_dir
            .as_deref()
            .filter(|d| !d.is_empty())?;
        let recorded = Path::new(d).parent().and_then(|p| p.canonicalize().ok());
        let here = self.dir.canonicalize().ok();
        if recorded.is_some() && recorded == here {
            Some(d.to_string())
        } else {
            Some(
                self.dir
                    .join("dump_tensor_data")
                    .to_string_lossy()
                    .into_owned(),
            )
        }
    }
}

/// A rank folder's `dump.json`, `construct.json` and `stack.json`, each checked to be there and
/// to be a regular file (a FIFO there would hold the conversion forever: it is named as what it
/// is, not as missing).
fn rank_files(dir: &Path) -> Result<[PathBuf; 3], ConvertError> {
    let file = |name: &str| {
        let p = dir.join(name);
        let message = match std::fs::metadata(&p) {
            Ok(m) if m.is_file() => return Ok(p),
            Ok(m) => format!(
                "not a regular file (it is {})",
                graph_ascend_dump::confine::file_kind(m.file_type())
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                "missing (every rank folder needs dump.json, construct.json and stack.json)".into()
            }
            Err(e) => format!("cannot be read: {e}"),
        };
        Err(ConvertError::Input { path: p, message })
    };
    Ok([
        file("dump.json")?,
        file("construct.json")?,
        file("stack.json")?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO at `dump.json` is named as what it is, not as missing (and never opened).
    #[test]
    fn a_fifo_dump_json_is_not_a_regular_file_and_an_absent_one_is_missing() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["construct.json", "stack.json"] {
            std::fs::write(dir.path().join(name), "{}").expect("write");
        }
        let missing = rank_files(dir.path()).expect_err("no dump.json");
        assert!(missing.to_string().contains("missing"), "{missing}");
        graph_ascend_testkit::special_files::make_fifo(&dir.path().join("dump.json"));
        let fifo = rank_files(dir.path()).expect_err("a FIFO dump.json");
        let text = fifo.to_string();
        assert!(text.contains("dump.json"), "{text}");
        assert!(text.contains("not a regular file (it is a FIFO)"), "{text}");
        assert!(!text.contains("missing"), "{text}");
    }
}
