//! Step 2, build: a rank folder's graph, its items attached (with overflow levels under
//! `-oc`). Reading and building overlap: see [`RankDump::read_and_build`].

use std::path::Path;

use graph_ascend_dump::{Construct, StackMap};

use super::run::Run;
use crate::dump_ops::DumpOps;
use crate::error::ConvertError;
use crate::graph::Graph;
use crate::options::{ConvertOptions, LayerMapping};
use crate::progress::Stage;
use crate::rank_dump::RankDump;
use crate::timing;

/// A rank folder read and its graph built.
pub(crate) struct Built {
    pub dump: RankDump,
    pub graph: Graph,
    /// The dump is an md5 one.
    pub md5: bool,
}

/// Reads a rank folder and builds its graph; the graph takes the dump's items, and the stacks
/// are freed once the nodes hold theirs. The bytes read are reported to `run`.
pub(crate) fn read_and_build(
    opts: &ConvertOptions,
    dir: &Path,
    run: &Run,
) -> Result<Built, ConvertError> {
    let p = timing::phase(|| format!("read and build {}", dir.display()));
    // A parallel merge moves items between rank graphs: it holds them. A plain conversion
    // reads them again from dump.json when it compares and writes (see `crate::entries`).
    let spans = opts.parallel.is_empty();
    // The hierarchy is in the graph once it is built; only a layer mapping reads construct.json
    // again (and a merge's JSON output).
    let keep_construct = !spans || opts.layer_mapping != LayerMapping::None;
    let (mut dump, graph) = RankDump::read_and_build_counted(
        dir,
        &opts.confine,
        opts.overflow_check,
        spans,
        keep_construct,
        &|n| run.read_bytes(n),
    )?;
    p.done();
    if !dump.dump.has_data {
        run.note(
            Stage::Reading,
            format!(
                "note: {} has no \"data\": the dump holds no data, its graph is the hierarchy only",
                dump.dump.path.display()
            ),
        );
    }
    let md5 = dump.ops.md5;
    dump.ops = DumpOps::default();
    dump.stacks = StackMap::default();
    if !keep_construct {
        dump.construct = Construct::default();
    }
    Ok(Built { dump, graph, md5 })
}
