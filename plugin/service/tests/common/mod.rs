//! Shared test helpers: fixture files, a logdir holding one of them, and a probe that calls the
//! handlers and renders their answers as the browser sees them (`graph_ascend_proto::json`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use graph_ascend_proto as pb;
use graph_ascend_service::handlers;
use graph_ascend_service::State;
use serde_json::Value;

/// `tests/fixtures` of the repository.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// `(case, golden answers)` for every case that has both a golden file and a `.vis.db`.
pub fn golden_cases() -> Vec<(String, Value)> {
    let dir = fixtures().join("golden_api26");
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("golden_api26 fixtures") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let case = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        if vis_db_xz(&case).is_none() {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read golden");
        cases.push((case, serde_json::from_str(&text).expect("golden JSON")));
    }
    cases.sort_by(|a, b| a.0.cmp(&b.0));
    cases
}

/// The compressed `.vis.db` of an upstream case.
pub fn vis_db_xz(case: &str) -> Option<PathBuf> {
    let dir = fixtures().join("upstream_vis").join(case);
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".vis.db.xz"))
}

/// Decompresses an upstream case's `.vis.db` into `dir/<run>/<name>.vis.db`.
pub fn unpack(case: &str, dir: &Path, run: &str) -> PathBuf {
    let xz = vis_db_xz(case).unwrap_or_else(|| panic!("no .vis.db.xz for {case}"));
    let name = xz
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".xz"))
        .expect("file name")
        .to_owned();
    let run_dir = dir.join(run);
    std::fs::create_dir_all(&run_dir).expect("mkdir");
    let mut input = std::io::BufReader::new(std::fs::File::open(&xz).expect("open xz"));
    let out_path = run_dir.join(name);
    let mut out = std::fs::File::create(&out_path).expect("create");
    lzma_rs::xz_decompress(&mut input, &mut out).expect("decompress");
    out_path
}

/// A temporary logdir holding one case as the run `run`, and a state serving it.
pub fn logdir_with(case: &str) -> (tempfile::TempDir, Arc<State>) {
    let dir = tempfile::tempdir().expect("tempdir");
    unpack(case, dir.path(), "run");
    let state = Arc::new(State::new(dir.path().to_path_buf()));
    (dir, state)
}

/// msprobe's `metaData` for step 0, rank 0, all micro steps.
pub fn meta(run: &str, tag: &str) -> pb::MetaData {
    pb::MetaData {
        run: run.into(),
        tag: tag.into(),
        r#type: "db".into(),
        lang: "en".into(),
        micro_step: Some(-1),
        step: Some(0),
        rank: Some(0),
    }
}

/// Calls handlers as one browser client and renders answers as JSON.
pub struct Probe {
    pub state: Arc<State>,
    pub client: String,
}

impl Probe {
    pub fn new(state: Arc<State>) -> Probe {
        Probe {
            state,
            client: "test".into(),
        }
    }

    pub fn load_meta_dir(&self) -> Value {
        browser_json(&handlers::load_meta_dir(&self.state))
    }

    pub fn config(&self, m: &pb::MetaData) -> Value {
        browser_json(&handlers::load_graph_config_info(
            &self.state,
            meta_request(m),
        ))
    }

    pub fn node_lists(&self, m: &pb::MetaData) -> Value {
        browser_json(&handlers::load_graph_all_node_list(
            &self.state,
            meta_request(m),
        ))
    }

    pub fn expand(&self, m: &pb::MetaData, name: &str, side: &str) -> Value {
        browser_json(&handlers::change_node_expand_state(
            &self.state,
            &self.client,
            node_request(m, name, side),
        ))
    }

    pub fn node_info(&self, m: &pb::MetaData, name: &str, side: &str) -> Value {
        browser_json(&handlers::get_node_info(
            &self.state,
            node_request(m, name, side),
        ))
    }

    pub fn filter(&self, m: &pb::MetaData, kind: &str, values: Vec<Value>) -> Value {
        browser_json(&handlers::filter_nodes(
            &self.state,
            pb::FilterNodesRequest {
                meta_data: Some(m.clone()),
                r#type: kind.into(),
                values: Some(prost_types::ListValue {
                    values: values
                        .iter()
                        .map(graph_ascend_service::json_to_prost)
                        .collect(),
                }),
                client_id: self.client.clone(),
            },
        ))
    }

    pub fn matched(&self, m: &pb::MetaData) -> Value {
        browser_json(&handlers::load_graph_matched_relations(
            &self.state,
            meta_request(m),
        ))
    }
}

/// An answer as the browser sees it: rendered by the sidecar's one JSON definition.
///
/// Every answer of these tests also checks the JSON writer: its bytes must be the bytes
/// serde_json writes for the same value (`graph_ascend_proto::json_check::canonical`).
pub fn browser_json<T: graph_ascend_proto::json::Fields + prost::Message>(answer: &T) -> Value {
    let bytes = graph_ascend_proto::json::to_vec(answer);
    if let Err(e) = graph_ascend_proto::json_check::canonical(&bytes) {
        panic!("{e}");
    }
    serde_json::from_slice(&bytes).expect("valid JSON")
}

pub fn meta_request(m: &pb::MetaData) -> pb::MetaRequest {
    pb::MetaRequest {
        meta_data: Some(m.clone()),
        client_id: String::new(),
    }
}

pub fn node_request(m: &pb::MetaData, name: &str, side: &str) -> pb::NodeRequest {
    pb::NodeRequest {
        node_info: Some(pb::NodeRef {
            node_name: name.into(),
            node_type: side.into(),
        }),
        meta_data: Some(m.clone()),
        client_id: String::new(),
    }
}

/// A gRPC client of a sidecar listening on the Unix socket `path`.
pub async fn connect(
    path: &Path,
) -> pb::graph_ascend_client::GraphAscendClient<tonic::transport::Channel> {
    let path = path.to_path_buf();
    let channel = tonic::transport::Endpoint::try_from("http://localhost")
        .expect("endpoint")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let p = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(p).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
        .expect("connect");
    pb::graph_ascend_client::GraphAscendClient::new(channel)
}
