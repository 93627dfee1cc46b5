//! The sidecar's fuzz entry points, taking raw bytes: a `.vis.db` file ([`vis_db`]), a request
//! ([`request`]) and the JSON the browser gets for strings, values and numbers ([`json_strings`],
//! against serde_json).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use graph_ascend_proto as pb;
use prost::Message;

use graph_ascend_service::{handlers, json_to_prost, prost_to_json, State};

/// A logdir with a run folder, and a state serving it (one per process: a state watches its
/// logdir with a thread).
struct Fixture {
    _dir: tempfile::TempDir,
    run: PathBuf,
    state: Arc<State>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary logdir for fuzzing");
        let run = dir.path().join("run");
        std::fs::create_dir_all(&run).expect("the run folder");
        let state = Arc::new(State::new(dir.path().to_path_buf()));
        Fixture {
            _dir: dir,
            run,
            state,
        }
    })
}

fn meta(tag: &str) -> pb::MetaData {
    pb::MetaData {
        run: "run".into(),
        tag: tag.into(),
        r#type: "db".into(),
        lang: "en".into(),
        micro_step: Some(-1),
        step: Some(0),
        rank: Some(0),
    }
}

/// A `.vis.db` file's bytes: opened through the visdb store, then through the sidecar's load
/// path (catalog, configuration, node lists, the root's hierarchy, a node's details, the
/// whole-graph indexes) as the page does after choosing the file.
pub fn vis_db(bytes: &[u8]) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let f = fixture();
    // A new name each time: nothing cached about an earlier input can answer for this one.
    let tag = format!("fuzz{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let path = f.run.join(format!("{tag}.vis.db"));
    if std::fs::write(&path, bytes).is_err() {
        return;
    }
    read_store(&path);
    let state = &f.state;
    let m = meta(&tag);
    let _ = handlers::load_meta_dir(state);
    let _ = handlers::load_graph_config_info(state, meta_request(&m));
    let _ = handlers::load_graph_all_node_list(state, meta_request(&m));
    let _ = handlers::load_graph_matched_relations(state, meta_request(&m));
    for side in ["NPU", "Bench"] {
        let expanded =
            handlers::change_node_expand_state(state, "fuzz", node_request(&m, "root", side));
        let _ = handlers::get_node_info(state, node_request(&m, "root", side));
        if let Some(first) = expanded.data.iter().find(|n| !n.is_root) {
            let name = first
                .key
                .trim_start_matches("N___")
                .trim_start_matches("B___");
            let _ = handlers::change_node_expand_state(state, "fuzz", node_request(&m, name, side));
            let _ = handlers::get_node_info(state, node_request(&m, name, side));
        }
        let _ = handlers::update_hierarchy_data(
            state,
            "fuzz",
            pb::UpdateHierarchyRequest {
                meta_data: Some(m.clone()),
                graph_type: side.into(),
                client_id: String::new(),
            },
        );
    }
    let _ = std::fs::remove_file(&path);
}

/// The store's own reads of the first graphs: configuration, root, children, ancestry.
fn read_store(path: &Path) {
    use graph_ascend_visdb::store::{GraphKey, Side, Store};
    let Ok(store) = Store::open(path) else {
        return;
    };
    let _ = store.config();
    let _ = store.has_indexes();
    for side in [Side::Npu, Side::Bench] {
        let graph = GraphKey {
            side,
            step: 0,
            rank: 0,
        };
        let _ = store.node_names(graph, -1);
        if let Ok(Some(root)) = store.root(graph) {
            if let Ok(children) = store.children(graph, &root.name) {
                for child in children.iter().take(4) {
                    let _ = store.ancestry(graph, &child.name);
                    let _ = store.node_detail(graph, &child.name);
                }
            }
        }
    }
}

fn meta_request(m: &pb::MetaData) -> pb::MetaRequest {
    pb::MetaRequest {
        meta_data: Some(m.clone()),
        client_id: String::new(),
    }
}

fn node_request(m: &pb::MetaData, name: &str, side: &str) -> pb::NodeRequest {
    pb::NodeRequest {
        meta_data: Some(m.clone()),
        node_info: Some(pb::NodeRef {
            node_name: name.into(),
            node_type: side.into(),
        }),
        client_id: String::new(),
    }
}

/// A request as the sidecar receives it: the first byte picks the RPC, the rest is decoded as
/// its protobuf request message and, when it decodes, answered by the handler (against a logdir
/// holding one real `.vis.db`, converted once from `tests/fixtures/dumps/mlp_overflow`, run `run`, tag `fuzz`). The
/// write RPCs (matching edits, conversions, saves) are left out: an input must not change what
/// the next one sees. Bytes that parse as JSON also go through the JSON ↔ protobuf value bridge.
pub fn request(bytes: &[u8]) {
    let Some((&which, body)) = bytes.split_first() else {
        return;
    };
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) {
        let _ = prost_to_json(&json_to_prost(&value));
    }
    let state = &served().state;
    macro_rules! call {
        ($ty:ty, $handler:expr) => {
            if let Ok(req) = <$ty>::decode(body) {
                let _ = $handler(req);
            }
        };
    }
    match which % 11 {
        0 => call!(pb::MetaRequest, |r| handlers::load_graph_config_info(
            state, r
        )),
        1 => call!(pb::MetaRequest, |r| handlers::load_graph_all_node_list(
            state, r
        )),
        2 => call!(pb::NodeRequest, |r| handlers::change_node_expand_state(
            state, "fuzz", r
        )),
        3 => call!(pb::UpdateHierarchyRequest, |r| {
            handlers::update_hierarchy_data(state, "fuzz", r)
        }),
        4 => call!(pb::NodeRequest, |r| handlers::get_node_info(state, r)),
        5 => call!(pb::FilterNodesRequest, |r| handlers::filter_nodes(state, r)),
        6 => call!(pb::SearchNodesRequest, |r| handlers::search_nodes(state, r)),
        7 => call!(pb::MetaRequest, |r| handlers::load_graph_matched_relations(
            state, r
        )),
        8 => call!(pb::UpdatePrecisionErrorRequest, |r| {
            handlers::update_precision_error(state, r)
        }),
        9 => call!(pb::LoadGraphDataRequest, |r| handlers::load_graph_data(
            state, r
        )),
        _ => {
            let _ = handlers::load_meta_dir(state);
        }
    }
}

/// The logdir [`request`] is answered from: a real conversion of a small fixture dump.
fn served() -> &'static Fixture {
    static SERVED: OnceLock<Fixture> = OnceLock::new();
    SERVED.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary logdir for fuzzing");
        let run = dir.path().join("run");
        let dumps = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/dumps/mlp_overflow/step0");
        let rank = std::fs::read_dir(&dumps)
            .expect("the fixture dump tests/fixtures/dumps/mlp_overflow")
            .flatten()
            .map(|e| e.path())
            .find(|p| p.is_dir())
            .expect("a rank folder in the fixture dump");
        let written = graph_ascend_convert::convert(
            &graph_ascend_convert::ConvertOptions {
                target: rank,
                output: run.clone(),
                ..Default::default()
            },
            &|_| {},
        )
        .expect("the fixture dump converts");
        // A fixed name, so that seed requests can name it (run "run", tag "fuzz").
        std::fs::rename(written, run.join("fuzz.vis.db")).expect("rename the converted file");
        let state = Arc::new(State::new(dir.path().to_path_buf()));
        Fixture {
            _dir: dir,
            run,
            state,
        }
    })
}

/// The browser's JSON writer (`graph_ascend_proto::json::write`) against serde_json on
/// arbitrary bytes: as a string when they are UTF-8, as a JSON value through the sidecar's own
/// JSON → protobuf bridge when serde_json parses them, and the first eight as a double. Panics
/// with the difference when a byte differs (`graph_ascend_proto::json_check`).
pub fn json_strings(bytes: &[u8]) {
    use graph_ascend_proto::json::write;
    use graph_ascend_proto::json_check::{canonical, compare};

    let check = |result: Result<(), graph_ascend_proto::json_check::Difference>| {
        if let Err(e) = result {
            panic!("{e}");
        }
    };
    let mut ours = Vec::new();
    if let Ok(s) = std::str::from_utf8(bytes) {
        write::string(&mut ours, s);
        check(compare("a string", &ours, &serde_to_vec(&s)));
    }
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) {
        // The value as the sidecar holds it (numbers as doubles), and as serde_json writes that.
        let value = json_to_prost(&value);
        ours.clear();
        write::value(&mut ours, &value);
        let expected = serde_to_vec(&prost_to_json(&value));
        check(compare("a JSON value", &ours, &expected));
        check(canonical(&ours));
    }
    if let Some(bits) = bytes.first_chunk::<8>() {
        let v = f64::from_le_bytes(*bits);
        ours.clear();
        write::number(&mut ours, v);
        check(compare("a number", &ours, &serde_to_vec(&v)));
        ours.clear();
        write::double(&mut ours, v);
        let expected = match v {
            v if v.is_nan() => b"\"NaN\"".to_vec(),
            f64::INFINITY => b"\"Infinity\"".to_vec(),
            f64::NEG_INFINITY => b"\"-Infinity\"".to_vec(),
            v => serde_to_vec(&v),
        };
        check(compare("a double", &ours, &expected));
    }
}

/// serde_json's compact bytes of a value it can always write (no map with non-string keys).
fn serde_to_vec<T: serde::Serialize + ?Sized>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_else(|e| panic!("serde_json refused a value: {e}"))
}
