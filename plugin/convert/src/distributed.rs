//! Communication links between ranks (`matched_distributed`), msprobe's `distributed_analyzer`.
//!
//! Only in rank/step folder modes. Every `Distributed.*` node of a rank gets a unique id: p2p
//! ops `<api>rank<peer>_<n>`, collectives `<group_id><api>_<n>` (n counts per rank, from 1; a
//! collective only when its group has both `group_ranks` and a `group_id`). The ranks are visited
//! in order, each rank's ops in node order; an op already linked (as the peer of an earlier one)
//! is passed over. A p2p op is linked to the peer op with the mirrored id on the peer rank when
//! that op points back, and the peer to it; a collective to the op with the same id and group on
//! every other rank of its group (broadcast/scatter/reduce/gather only from their root, which
//! also links each peer back to the root). Each side lists its peers with the peer's precision
//! index (or overflow level with `-oc`). `batch_isend_irecv` is never linked: msprobe reads its
//! P2P ops from the dump's output when it builds a graph, not from the database it links from.

use std::collections::{BTreeMap, HashMap};

use graph_ascend_dump::FastMap;
use graph_ascend_visdb::writer::NodeRow;
use serde_json::Value;

use crate::pyjson;

/// How an API communicates.
enum Kind {
    /// `(peer api, rank field, communications_type)`.
    P2p(&'static str, &'static str, &'static str),
    /// `(root position field, type of the root)`.
    Rooted(&'static str, &'static str),
    /// `batch_isend_irecv`.
    Batch,
    Collective,
}

fn kind(api: &str) -> Kind {
    match api {
        "send" => Kind::P2p("recv", "dst", "send"),
        "isend" => Kind::P2p("irecv", "dst", "send"),
        "recv" => Kind::P2p("send", "src", "receive"),
        "irecv" => Kind::P2p("isend", "src", "receive"),
        "broadcast" => Kind::Rooted("1", "send"),
        "scatter" => Kind::Rooted("src", "send"),
        "gather" => Kind::Rooted("dst", "receive"),
        "reduce" => Kind::Rooted("1", "receive"),
        "batch_isend_irecv" => Kind::Batch,
        _ => Kind::Collective,
    }
}

fn reverse(t: &str) -> &'static str {
    match t {
        "send" => "receive",
        "receive" => "send",
        _ => "send_receive",
    }
}

struct Op {
    row: usize,
    name: String,
    api: String,
    input: serde_json::Map<String, Value>,
}

impl Op {
    /// `input_data["<id>.input.<name>"][key]` as text (the db stores every value as a string).
    fn field(&self, name: &str, key: &str) -> Option<String> {
        let item = self.input.get(&format!("{}.input.{name}", self.name))?;
        match item.get(key)? {
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    }

    fn int_field(&self, name: &str) -> Option<i64> {
        self.field(name, "value")?.trim().parse().ok()
    }

    /// The ranks and id of the op's `group` (msprobe's `_get_group_info`): none unless
    /// `group_ranks` is a non-empty list and `group_id` is not empty.
    fn group(&self) -> Option<(Vec<i64>, String)> {
        let text = self.field("group", "group_ranks")?;
        let ranks = serde_json::from_str::<Vec<i64>>(&text).unwrap_or_default();
        let id = self.field("group", "group_id").filter(|g| !g.is_empty())?;
        (!ranks.is_empty()).then_some((ranks, id))
    }
}

/// `(communications_type, [(peer rank, peer index, peer node)])` of one node.
type Links = (&'static str, Vec<(i64, String, String)>);

type Graphs = BTreeMap<(String, i64), BTreeMap<i64, Vec<Op>>>;

/// Rank → unique id → position of its op in the rank's list.
type UniqueIds = BTreeMap<i64, HashMap<String, usize>>;

/// `matched_distributed` of every linked row of `rows` (the `Distributed.*` rows of all ranks
/// and steps of a conversion), by row id.
pub(crate) fn links(mut rows: Vec<NodeRow>, overflow_check: bool) -> FastMap<String, String> {
    link(&mut rows, overflow_check);
    rows.into_iter()
        .filter(|r| r.matched_distributed != "{}")
        .map(|r| (r.id, r.matched_distributed))
        .collect()
}

/// Fills `matched_distributed` of the rows of `Distributed.*` nodes.
fn link(rows: &mut [NodeRow], overflow_check: bool) {
    let graphs = ops_by_graph(rows);
    let index_of = |i: usize| peer_index(&rows[i], overflow_check);
    let mut results: HashMap<usize, Links> = HashMap::new();
    for ranks in graphs.values() {
        let (unique, ids) = unique_ids(ranks);
        for (&rank, ops) in ranks {
            for op in ops {
                if results.contains_key(&op.row) {
                    continue;
                }
                let Some(uid) = ids.get(&op.row) else {
                    continue;
                };
                match kind(&op.api) {
                    Kind::Batch => {}
                    Kind::P2p(peer_api, field, ctype) => {
                        let Some(target) = op.int_field(field) else {
                            continue;
                        };
                        let count = uid.rsplit('_').next().unwrap_or("1");
                        let peer_uid = format!("{peer_api}rank{rank}_{count}");
                        let Some(&k) = unique.get(&target).and_then(|m| m.get(&peer_uid)) else {
                            continue;
                        };
                        let peer = &ranks[&target][k];
                        let Kind::P2p(_, back_field, peer_ctype) = kind(peer_api) else {
                            continue;
                        };
                        if peer.int_field(back_field) != Some(rank) {
                            continue;
                        }
                        let to_peer = (target, index_of(peer.row), peer.name.clone());
                        let to_op = (rank, index_of(op.row), op.name.clone());
                        results.insert(op.row, (ctype, vec![to_peer]));
                        results.insert(peer.row, (peer_ctype, vec![to_op]));
                    }
                    Kind::Rooted(pos, ctype) => {
                        if op.int_field(pos) == Some(rank) {
                            link_group(
                                op,
                                rank,
                                uid,
                                Some(ctype),
                                ranks,
                                &unique,
                                &index_of,
                                &mut results,
                            );
                        }
                    }
                    Kind::Collective => {
                        link_group(op, rank, uid, None, ranks, &unique, &index_of, &mut results);
                    }
                }
            }
        }
    }
    for (row, links) in results {
        rows[row].matched_distributed = links_text(&links);
    }
}

/// msprobe's `_collective_match`: links `op` (rank `rank`, unique id `uid`) to the op with the
/// same unique id and group id on every other rank of its group; a rooted op (`root_type`, the
/// type of the root) also links each of those back to it.
#[allow(clippy::too_many_arguments)]
fn link_group(
    op: &Op,
    rank: i64,
    uid: &str,
    root_type: Option<&'static str>,
    ranks: &BTreeMap<i64, Vec<Op>>,
    unique: &UniqueIds,
    index_of: &dyn Fn(usize) -> String,
    results: &mut HashMap<usize, Links>,
) {
    let Some((group_ranks, group)) = op.group() else {
        return;
    };
    let mut infos: Vec<(i64, String, String)> = Vec::new();
    for target in group_ranks.into_iter().filter(|&t| t != rank) {
        let Some(&k) = unique.get(&target).and_then(|m| m.get(uid)) else {
            continue;
        };
        let peer = &ranks[&target][k];
        if peer.group().is_none_or(|(_, g)| g != group) {
            continue;
        }
        let info = (target, index_of(peer.row), peer.name.clone());
        // a dict keyed by rank: a repeated rank keeps its first place
        match infos.iter_mut().find(|(t, _, _)| *t == target) {
            Some(slot) => *slot = info,
            None => infos.push(info),
        }
        if let Some(ctype) = root_type {
            let to_root = (rank, index_of(op.row), op.name.clone());
            results.insert(peer.row, (reverse(ctype), vec![to_root]));
        }
    }
    if !infos.is_empty() {
        results.insert(op.row, (root_type.unwrap_or("send_receive"), infos));
    }
}

/// The `Distributed.*` ops of `rows`: data source, step → rank → ops in node order.
fn ops_by_graph(rows: &[NodeRow]) -> Graphs {
    let mut graphs: Graphs = BTreeMap::new();
    let mut order: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].is_distributed == 1)
        .collect();
    order.sort_by_key(|&i| rows[i].node_order);
    for i in order {
        let r = &rows[i];
        let api = r.node_name.split('.').nth(1).unwrap_or("").to_string();
        let input = match serde_json::from_str::<Value>(&r.input_data) {
            Ok(Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        graphs
            .entry((r.data_source.clone(), r.step))
            .or_default()
            .entry(r.rank)
            .or_default()
            .push(Op {
                row: i,
                name: r.node_name.clone(),
                api,
                input,
            });
    }
    graphs
}

/// What a peer's side of a link shows of a row: its overflow level under `-oc`, else its
/// precision index (`Nan` when it has none).
fn peer_index(row: &NodeRow, overflow_check: bool) -> String {
    if overflow_check {
        row.overflow_level.clone().unwrap_or_else(|| "Nan".into())
    } else {
        match row.precision_index {
            None => "Nan".into(),
            Some(p) if p.fract() == 0.0 => format!("{}", p as i64),
            Some(p) => p.to_string(),
        }
    }
}

/// Rank → unique id → position of its op, and row → unique id, for the ops of one graph's
/// ranks: p2p ops `<api>rank<peer>_<n>`, collectives `<group_id><api>_<n>` (`n` counts per
/// rank, from 1); an op without its peer or group (see [`Op::group`]) has none.
fn unique_ids(ranks: &BTreeMap<i64, Vec<Op>>) -> (UniqueIds, HashMap<usize, String>) {
    let mut unique = UniqueIds::new();
    let mut ids: HashMap<usize, String> = HashMap::new();
    for (&rank, ops) in ranks {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for (k, op) in ops.iter().enumerate() {
            let key = match kind(&op.api) {
                Kind::Batch => continue,
                Kind::P2p(_, field, _) => match op.int_field(field) {
                    Some(t) => format!("{}rank{t}", op.api),
                    None => continue,
                },
                Kind::Rooted(..) | Kind::Collective => match op.group() {
                    Some((_, g)) => format!("{g}{}", op.api),
                    None => continue,
                },
            };
            let c = counts.entry(key.clone()).or_insert(0);
            *c += 1;
            let uid = format!("{key}_{c}");
            unique.entry(rank).or_default().insert(uid.clone(), k);
            ids.insert(op.row, uid);
        }
    }
    (unique, ids)
}

/// A row's `matched_distributed` text, as msprobe's `json.dumps` writes it.
fn links_text((ctype, infos): &Links) -> String {
    let mut out = String::from("{\"communications_type\": ");
    pyjson::push_str(&mut out, ctype);
    out.push_str(", \"nodes_info\": {");
    for (i, (rank, index, name)) in infos.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        pyjson::push_str(&mut out, &rank.to_string());
        out.push_str(": ");
        out.push_str(&pyjson::str_list(&[index.as_str(), name.as_str()]));
    }
    out.push_str("}}");
    out
}
