//! The gRPC edge: the `GraphAscend` service of the proto, over [`crate::handlers`].
//!
//! Each RPC runs its handler where it may block (SQLite calls block; see `blocking`: on the
//! request's own worker thread) and turns only a failure of the server itself (a panicked or
//! cancelled handler) into a gRPC status; answers about bad requests or bad files are ordinary
//! responses with `success: false`, as the page expects. `CallJson` and `StreamJson`, the shim's
//! path, call the same typed RPCs and render their answers with [`graph_ascend_proto::json`], the
//! one definition of the browser's JSON.

use std::pin::Pin;
use std::sync::Arc;

use graph_ascend_proto as pb;
use pb::graph_ascend_server::GraphAscend;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use crate::handlers;
use crate::state::State;

/// The service object tonic serves.
#[derive(Clone)]
pub struct GraphService {
    state: Arc<State>,
}

impl GraphService {
    pub fn new(state: Arc<State>) -> GraphService {
        GraphService { state }
    }
}

/// The client whose view state a request uses (requests without an id share one).
fn client_of(client_id: &str) -> String {
    if client_id.is_empty() {
        "default".to_owned()
    } else {
        client_id.to_owned()
    }
}

/// Runs a handler that may wait long (for an index build, a file write, a conversion, the walk of
/// the logdir) on a thread of the blocking pool, so that the runtime's workers stay free and stay
/// the same threads: [`quick`] handlers and every answer's JSON run on them, with their caches
/// and allocator memory warm. (`block_in_place` ran the handler on the worker's thread instead
/// and moved the worker's role to another thread each time.) A panicking handler becomes an
/// `internal` status, not a dead connection.
async fn blocking<T: Send + 'static>(
    state: &Arc<State>,
    f: impl FnOnce(&State) -> T + Send + 'static,
) -> Result<Response<T>, Status> {
    let state = state.clone();
    match tokio::task::spawn_blocking(move || quick(&state, f)).await {
        Ok(answered) => answered,
        Err(e) => Err(handler_failed(&e)),
    }
}

/// Runs a handler whose work is bounded by the answer it makes (the page's opening requests and
/// its clicks: a file's configuration, a layout, a node's details) right on the runtime's worker
/// thread, like the JSON of every answer. It waits for no background build and writes no file.
///
/// On the same few threads, the answers of consecutive clicks find caches and allocator memory
/// warm; under `block_in_place`, which moved the worker's role to another thread on each call,
/// they did not, and each first layout took about 0.3 ms longer (`docs/service.md`, "Clicks
/// answered on the runtime's own threads"). What may wait long goes through [`blocking`], so that
/// it never holds a worker. A panicking handler becomes an `internal` status, as there.
fn quick<T>(state: &State, f: impl FnOnce(&State) -> T) -> Result<Response<T>, Status> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(state)))
        .map(Response::new)
        .map_err(|panic| handler_failed(&panic_text(panic.as_ref())))
}

/// The status of a request whose handler failed (panicked, or could not be run).
fn handler_failed(reason: &dyn std::fmt::Display) -> Status {
    Status::internal(format!("request handler failed: {reason}"))
}

/// The message of a caught panic.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(text), _) => format!("panicked: {text}"),
        (_, Some(text)) => format!("panicked: {text}"),
        _ => "panicked".to_owned(),
    }
}

type ListingStream = Pin<Box<dyn Stream<Item = Result<pb::LoadMetaDirResponse, Status>> + Send>>;
type ProgressStream = Pin<Box<dyn Stream<Item = Result<pb::ConvertProgress, Status>> + Send>>;
type FileStream = Pin<Box<dyn Stream<Item = Result<pb::FileChunk, Status>> + Send>>;

#[tonic::async_trait]
impl GraphAscend for GraphService {
    async fn load_meta_dir(
        &self,
        _req: Request<pb::LoadMetaDirRequest>,
    ) -> Result<Response<pb::LoadMetaDirResponse>, Status> {
        blocking(&self.state, handlers::load_meta_dir).await
    }

    type WatchMetaDirStream = ListingStream;

    async fn watch_meta_dir(
        &self,
        _req: Request<pb::LoadMetaDirRequest>,
    ) -> Result<Response<Self::WatchMetaDirStream>, Status> {
        let state = self.state.clone();
        let mut events = state.watch.subscribe();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            let mut last: Option<pb::LoadMetaDirResponse> = None;
            loop {
                let scan_state = state.clone();
                let listing =
                    match tokio::task::spawn_blocking(move || handlers::load_meta_dir(&scan_state))
                        .await
                    {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = tx.send(Err(Status::internal(e.to_string()))).await;
                            return;
                        }
                    };
                if last.as_ref() != Some(&listing) {
                    if tx.send(Ok(listing.clone())).await.is_err() {
                        return;
                    }
                    last = Some(listing);
                }
                tokio::select! {
                    changed = events.changed() => {
                        if changed.is_err() { return; }
                        tokio::time::sleep(crate::watch::QUIET).await;
                        events.borrow_and_update();
                    }
                    _ = tokio::time::sleep(crate::watch::POLL) => {}
                    _ = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn load_graph_data(
        &self,
        req: Request<pb::LoadGraphDataRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let req = req.into_inner();
        quick(&self.state, move |s| handlers::load_graph_data(s, req))
    }

    async fn load_graph_config_info(
        &self,
        req: Request<pb::MetaRequest>,
    ) -> Result<Response<pb::ConfigInfoResponse>, Status> {
        let req = req.into_inner();
        quick(&self.state, move |s| {
            handlers::load_graph_config_info(s, req)
        })
    }

    async fn load_graph_all_node_list(
        &self,
        req: Request<pb::MetaRequest>,
    ) -> Result<Response<pb::NodeListResponse>, Status> {
        let req = req.into_inner();
        blocking(&self.state, move |s| {
            handlers::load_graph_all_node_list(s, req)
        })
        .await
    }

    async fn change_node_expand_state(
        &self,
        req: Request<pb::NodeRequest>,
    ) -> Result<Response<pb::HierarchyResponse>, Status> {
        let req = req.into_inner();
        let client = client_of(&req.client_id);
        quick(&self.state, move |s| {
            handlers::change_node_expand_state(s, &client, req)
        })
    }

    async fn update_hierarchy_data(
        &self,
        req: Request<pb::UpdateHierarchyRequest>,
    ) -> Result<Response<pb::HierarchyResponse>, Status> {
        let req = req.into_inner();
        let client = client_of(&req.client_id);
        quick(&self.state, move |s| {
            handlers::update_hierarchy_data(s, &client, req)
        })
    }

    async fn get_node_info(
        &self,
        req: Request<pb::NodeRequest>,
    ) -> Result<Response<pb::NodeInfoResponse>, Status> {
        let req = req.into_inner();
        quick(&self.state, move |s| handlers::get_node_info(s, req))
    }

    async fn filter_nodes(
        &self,
        req: Request<pb::FilterNodesRequest>,
    ) -> Result<Response<pb::FilterNodesResponse>, Status> {
        let req = req.into_inner();
        blocking(&self.state, move |s| handlers::filter_nodes(s, req)).await
    }

    async fn search_nodes(
        &self,
        req: Request<pb::SearchNodesRequest>,
    ) -> Result<Response<pb::SearchNodesResponse>, Status> {
        let req = req.into_inner();
        blocking(&self.state, move |s| handlers::search_nodes(s, req)).await
    }

    async fn load_graph_matched_relations(
        &self,
        req: Request<pb::MetaRequest>,
    ) -> Result<Response<pb::MatchedRelationsResponse>, Status> {
        let req = req.into_inner();
        blocking(&self.state, move |s| {
            handlers::load_graph_matched_relations(s, req)
        })
        .await
    }

    async fn add_match_nodes(
        &self,
        req: Request<pb::MatchNodesRequest>,
    ) -> Result<Response<pb::MatchResultResponse>, Status> {
        let req = req.into_inner();
        blocking(&self.state, move |s| handlers::add_match_nodes(s, req)).await
    }

    async fn delete_match_nodes(
        &self,
        req: Request<pb::MatchNodesRequest>,
    ) -> Result<Response<pb::MatchResultResponse>, Status> {
        let req = req.into_inner();
        blocking(&self.state, move |s| handlers::delete_match_nodes(s, req)).await
    }

    async fn add_match_nodes_by_config(
        &self,
        req: Request<pb::MatchByConfigRequest>,
    ) -> Result<Response<pb::MatchResultResponse>, Status> {
        let req = req.into_inner();
        blocking(&self.state, move |s| {
            handlers::add_match_nodes_by_config(s, req)
        })
        .await
    }

    async fn save_matched_relations(
        &self,
        req: Request<pb::MetaRequest>,
    ) -> Result<Response<pb::SaveMatchedRelationsResponse>, Status> {
        let req = req.into_inner();
        blocking(&self.state, move |s| {
            handlers::save_matched_relations(s, req)
        })
        .await
    }

    async fn save_data(
        &self,
        req: Request<pb::MetaRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let req = req.into_inner();
        blocking(&self.state, move |s| handlers::save_data(s, req)).await
    }

    async fn update_colors(
        &self,
        req: Request<pb::UpdateColorsRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let req = req.into_inner();
        blocking(&self.state, move |s| handlers::update_colors(s, req)).await
    }

    async fn update_precision_error(
        &self,
        req: Request<pb::UpdatePrecisionErrorRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let req = req.into_inner();
        blocking(&self.state, move |s| {
            handlers::update_precision_error(s, req)
        })
        .await
    }

    async fn load_converted_graph_data(
        &self,
        _req: Request<pb::LoadConvertedGraphDataRequest>,
    ) -> Result<Response<pb::ConvertCandidatesResponse>, Status> {
        blocking(&self.state, handlers::load_converted_graph_data).await
    }

    async fn convert_to_graph(
        &self,
        req: Request<pb::ConvertRequest>,
    ) -> Result<Response<pb::ConvertStartResponse>, Status> {
        let req = req.into_inner();
        let client = client_of(&req.client_id);
        blocking(&self.state, move |s| {
            handlers::convert_to_graph(s, &client, req)
        })
        .await
    }

    type GetConvertProgressStream = ProgressStream;

    async fn get_convert_progress(
        &self,
        req: Request<pb::ConvertProgressRequest>,
    ) -> Result<Response<Self::GetConvertProgressStream>, Status> {
        let req = req.into_inner();
        let client = client_of(&req.client_id);
        let stream = handlers::progress_stream(&self.state, &client, &req.job_id);
        Ok(Response::new(Box::pin(stream.map(Ok))))
    }

    async fn get_convert_state(
        &self,
        req: Request<pb::ConvertProgressRequest>,
    ) -> Result<Response<pb::ConvertProgress>, Status> {
        let req = req.into_inner();
        let client = client_of(&req.client_id);
        blocking(&self.state, move |s| {
            handlers::convert_state(s, &client, &req.job_id)
        })
        .await
    }

    async fn cancel_convert(
        &self,
        req: Request<pb::ConvertProgressRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let req = req.into_inner();
        let client = client_of(&req.client_id);
        blocking(&self.state, move |s| {
            handlers::cancel_convert(s, &client, &req.job_id)
        })
        .await
    }

    async fn diagnose(
        &self,
        req: Request<pb::DiagnoseRequest>,
    ) -> Result<Response<pb::DiagnoseResponse>, Status> {
        let req = req.into_inner();
        blocking(&self.state, move |s| handlers::diagnose(s, req)).await
    }

    type ExportCsvStream = FileStream;

    /// The CSV is written on the blocking pool into a small channel: at most a few chunks wait
    /// for a slow reader, and a reader that goes away stops the export.
    async fn export_csv(
        &self,
        req: Request<pb::ExportCsvRequest>,
    ) -> Result<Response<Self::ExportCsvStream>, Status> {
        let req = req.into_inner();
        let state = self.state.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::task::spawn_blocking(move || {
            handlers::export_csv(&state, req, &mut |chunk| {
                tx.blocking_send(Ok(chunk)).is_ok()
            })
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn call_json(
        &self,
        req: Request<pb::JsonCall>,
    ) -> Result<Response<pb::JsonAnswer>, Status> {
        // Each answer's time in the sidecar (handler and JSON), at debug level: with the shim's
        // and TensorBoard's times it says where a request's time goes (`serve --log`).
        let started = std::time::Instant::now();
        let call = req.into_inner();
        let method = tracing::enabled!(tracing::Level::DEBUG).then(|| call.method.clone());
        let answer = graph_ascend_proto::json::call(self, call).await?;
        if let Some(method) = method {
            tracing::debug!(
                "{method}: {} us, {} bytes",
                started.elapsed().as_micros(),
                answer.json.len()
            );
        }
        Ok(Response::new(answer))
    }

    type StreamJsonStream = graph_ascend_proto::json::JsonStream;

    async fn stream_json(
        &self,
        req: Request<pb::JsonCall>,
    ) -> Result<Response<Self::StreamJsonStream>, Status> {
        graph_ascend_proto::json::stream(self, req.into_inner())
            .await
            .map(Response::new)
    }
}
