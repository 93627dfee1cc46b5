//! What to replay: dump folders (`-tp`/`-gp`, or one folder), or the two runs a compare
//! `.vis.db` points at. A `.vis.db`'s nodes record their run's tensor folder in
//! `dump_data_dir`, an absolute path on the machine that converted the file; its `dump.json` is
//! the one beside that folder (the file flattens each call's arguments into display text, so
//! the arguments are read from the dump). `--dump-root OLD=NEW` relocates those paths.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use graph_ascend_replay::DumpRun;
use graph_ascend_visdb::store::{GraphKey, Side, Store};

/// Which run of a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Target,
    Golden,
}

impl Role {
    pub fn word(self) -> &'static str {
        match self {
            Role::Target => "target",
            Role::Golden => "golden",
        }
    }
}

/// One run to replay: its dump, and, from a `.vis.db`, the names of its graph's nodes (only
/// those records are replayed).
#[derive(Debug)]
pub struct RunSource {
    pub role: Role,
    pub dump: DumpRun,
    pub nodes: Option<HashSet<String>>,
}

/// A target run, its golden run when there is one, and how their calls pair.
#[derive(Debug)]
pub struct Pairing {
    /// `step 0, rank 1` when the `.vis.db` holds several graphs; `None` otherwise.
    pub label: Option<String>,
    /// The folder name this pairing's files go in under `-o` (`""`: `-o` itself).
    pub subdir: String,
    pub target: RunSource,
    pub golden: Option<RunSource>,
    /// Target name → golden name, from the `.vis.db`'s matches; a target call not in it pairs
    /// with the golden call of the same name.
    pub links: HashMap<String, String>,
}

impl Pairing {
    /// The golden name a target call pairs with.
    pub fn golden_of<'a>(&'a self, target: &'a str) -> &'a str {
        self.links.get(target).map_or(target, String::as_str)
    }
}

/// `--dump-root OLD=NEW`: a recorded path under `OLD` is read under `NEW`.
#[derive(Debug, Clone)]
pub struct DumpRoot {
    pub old: PathBuf,
    pub new: PathBuf,
}

impl DumpRoot {
    pub fn parse(text: &str) -> anyhow::Result<DumpRoot> {
        match text.split_once('=') {
            Some((old, new)) if !old.is_empty() && !new.is_empty() => Ok(DumpRoot {
                old: PathBuf::from(old),
                new: PathBuf::from(new),
            }),
            _ => bail!("--dump-root takes OLD=NEW (a path prefix recorded in the file, and where it is now), not {text:?}"),
        }
    }
}

/// `recorded` under the longest matching `OLD` of `roots` moved to its `NEW`, else as it is.
pub fn relocate(recorded: &Path, roots: &[DumpRoot]) -> PathBuf {
    roots
        .iter()
        .filter_map(|r| recorded.strip_prefix(&r.old).ok().map(|rest| (r, rest)))
        .max_by_key(|(r, _)| r.old.components().count())
        .map_or_else(|| recorded.to_path_buf(), |(r, rest)| r.new.join(rest))
}

/// Whether `path` is a `.vis.db` file (by its name), rather than a dump folder.
pub fn is_visdb(path: &Path) -> bool {
    path.is_file() && path.to_string_lossy().ends_with(".vis.db")
}

/// `-tp TARGET [-gp GOLDEN]` or one folder: calls pair by name.
pub fn from_folders(target: &Path, golden: Option<&Path>) -> anyhow::Result<Vec<Pairing>> {
    let target = RunSource {
        role: Role::Target,
        dump: DumpRun::find(target)?,
        nodes: None,
    };
    let golden = golden
        .map(|g| -> anyhow::Result<RunSource> {
            Ok(RunSource {
                role: Role::Golden,
                dump: DumpRun::find(g)?,
                nodes: None,
            })
        })
        .transpose()?;
    Ok(vec![Pairing {
        label: None,
        subdir: String::new(),
        target,
        golden,
        links: HashMap::new(),
    }])
}

/// Every graph (step, rank) of a `.vis.db`: its target side, and its golden side in a compare.
pub fn from_visdb(path: &Path, roots: &[DumpRoot]) -> anyhow::Result<Vec<Pairing>> {
    let store = Store::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let config = store
        .config()
        .with_context(|| format!("cannot read {}", path.display()))?;
    if config.is_compare() && config.task != "all" {
        bail!(
            "{}: a {} compare holds statistics only: precheck needs a compare of tensor dumps (task \"all\")",
            path.display(),
            if config.task.is_empty() { "statistics" } else { &config.task }
        );
    }
    let graphs = store
        .graphs_present()
        .with_context(|| format!("cannot read {}", path.display()))?;
    if graphs.is_empty() {
        bail!("{}: no graph in the file", path.display());
    }
    let several = graphs.len() > 1;
    let mut pairings = Vec::new();
    for (step, rank) in graphs {
        let Some((target, target_links)) = read_side(
            &store,
            path,
            GraphKey {
                side: Side::Npu,
                step,
                rank,
            },
            roots,
        )?
        else {
            continue;
        };
        let golden = if config.is_compare() {
            read_side(
                &store,
                path,
                GraphKey {
                    side: Side::Bench,
                    step,
                    rank,
                },
                roots,
            )?
            .map(|(g, _)| g)
        } else {
            None
        };
        let links = target_links
            .into_iter()
            .filter_map(|(t, g)| g.map(|g| (t, g)))
            .collect();
        pairings.push(Pairing {
            label: several.then(|| format!("step {step}, rank {rank}")),
            subdir: if several {
                format!("step{step}_rank{rank}")
            } else {
                String::new()
            },
            target,
            golden,
            links,
        });
    }
    Ok(pairings)
}

/// A graph's node names with their match (the last of `matched_node_link`).
type Links = Vec<(String, Option<String>)>;

/// One side of one graph of a `.vis.db`: where its dump is now, its nodes and their matches;
/// `None` when the file has no such graph.
fn read_side(
    store: &Store,
    path: &Path,
    graph: GraphKey,
    roots: &[DumpRoot],
) -> anyhow::Result<Option<(RunSource, Links)>> {
    let links = store
        .match_links(graph, -1)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if links.is_empty() {
        return Ok(None);
    }
    let role = match graph.side {
        Side::Npu => Role::Target,
        Side::Bench => Role::Golden,
    };
    let mut recorded = None;
    for (name, _) in &links {
        if let Some(d) = store
            .dump_data_dir(graph, name)
            .with_context(|| format!("cannot read {}", path.display()))?
        {
            recorded = Some(d);
            break;
        }
    }
    let Some(recorded) = recorded else {
        bail!(
            "{}: the {} graph of step {}, rank {} records no dump_data_dir (its dump is not a tensor dump)",
            path.display(),
            role.word(),
            graph.step,
            graph.rank
        );
    };
    let tensor_dir = relocate(Path::new(&recorded), roots);
    let dump_json = tensor_dir
        .parent()
        .map(|p| p.join("dump.json"))
        .unwrap_or_else(|| PathBuf::from("dump.json"));
    if !dump_json.is_file() {
        bail!(
            "{}: the {} run's dump.json is not at {} (the file records dump_data_dir {recorded}, a path on the machine that converted it: point at where the dump is now with --dump-root OLD=NEW)",
            path.display(),
            role.word(),
            dump_json.display()
        );
    }
    let nodes = links.iter().map(|(n, _)| n.clone()).collect();
    Ok(Some((
        RunSource {
            role,
            dump: DumpRun {
                dump_json,
                tensor_dir,
            },
            nodes: Some(nodes),
        },
        links,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_root_relocates() {
        let roots = [
            DumpRoot::parse("/data=/mnt/a").unwrap(),
            DumpRoot::parse("/data/dumps=/mnt/b").unwrap(),
        ];
        assert_eq!(
            relocate(
                Path::new("/data/dumps/run/step0/rank0/dump_tensor_data"),
                &roots
            ),
            PathBuf::from("/mnt/b/run/step0/rank0/dump_tensor_data")
        );
        assert_eq!(
            relocate(Path::new("/data/x"), &roots),
            PathBuf::from("/mnt/a/x")
        );
        // A prefix of a component is not a root: /database is not under /data.
        assert_eq!(
            relocate(Path::new("/database/x"), &roots),
            PathBuf::from("/database/x")
        );
        assert!(DumpRoot::parse("nothing").is_err());
        assert!(DumpRoot::parse("=/x").is_err());
    }
}
