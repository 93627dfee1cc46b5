//! The gRPC edge: the `GraphAscend` service of the proto, over [`crate::handlers`].
//!
//! The wrapper of each routed unary RPC is generated from the proto
//! ([`graph_ascend_proto::graph_ascend_service!`], invoked at the end of this file with one handler
//! per RPC): it runs the handler through [`GraphService::quick`], right on the runtime's worker
//! thread, or, for the RPCs the proto marks `option (blocking) = true` (the handlers that may wait
//! long: index builds, file writes, conversions, the logdir walk), through
//! [`GraphService::blocking`], on the blocking pool. Only a failure of the server itself (a
//! panicked or cancelled handler) becomes a gRPC status; answers about bad requests or bad files
//! are ordinary responses with `success: false`, as the page expects. The streams and the shim's
//! path are written here: `CallJson` and `StreamJson` call the same typed RPCs and render their
//! answers with [`graph_ascend_proto::json`], the one definition of the browser's JSON.

use std::sync::Arc;

use graph_ascend_proto as pb;
use pb::rpc::ServerStream;
use tokio_stream::StreamExt;
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

impl GraphService {
    /// Runs a handler that may wait long (for an index build, a file write, a conversion, the
    /// walk of the logdir: the RPCs marked `blocking` in the proto) on a thread of the blocking
    /// pool, so that the runtime's workers stay free and stay the same threads: [`Self::quick`]
    /// handlers and every answer's JSON run on them, with their caches and allocator memory warm.
    /// (`block_in_place` ran the handler on the worker's thread instead and moved the worker's
    /// role to another thread each time.) A panicking handler becomes an `internal` status, not a
    /// dead connection.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&State) -> T + Send + 'static,
    ) -> Result<Response<T>, Status> {
        let state = self.state.clone();
        match tokio::task::spawn_blocking(move || run_caught(&state, f)).await {
            Ok(answered) => answered,
            Err(e) => Err(handler_failed(&e)),
        }
    }

    /// Runs a handler whose work is bounded by the answer it makes (the page's opening requests
    /// and its clicks: a file's configuration, a layout, a node's details; the RPCs not marked
    /// `blocking` in the proto) right on the runtime's worker thread, like the JSON of every
    /// answer. It waits for no background build and writes no file.
    ///
    /// On the same few threads, the answers of consecutive clicks find caches and allocator
    /// memory warm; under `block_in_place`, which moved the worker's role to another thread on
    /// each call, they did not, and each first layout took about 0.3 ms longer (`docs/service.md`,
    /// "Clicks answered on the runtime's own threads"). What may wait long goes through
    /// [`Self::blocking`], so that it never holds a worker. A panicking handler becomes an
    /// `internal` status, as there.
    fn quick<T>(&self, f: impl FnOnce(&State) -> T) -> Result<Response<T>, Status> {
        run_caught(&self.state, f)
    }
}

/// Runs a handler, a panic caught and turned into an `internal` status.
fn run_caught<T>(state: &State, f: impl FnOnce(&State) -> T) -> Result<Response<T>, Status> {
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

/// The RPCs that are not a handler's answer: the streams and the shim's path (named in the
/// generated impl below).
impl GraphService {
    /// `WatchMetaDir`: the listing now, then again whenever it changes (the logdir walked on the
    /// blocking pool after each file event, or every `watch::POLL`).
    async fn watch_listing(
        &self,
        _req: Request<pb::LoadMetaDirRequest>,
    ) -> Result<Response<ServerStream<pb::LoadMetaDirResponse>>, Status> {
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

    /// `GetConvertProgress`: the job's progress events.
    async fn progress_events(
        &self,
        req: Request<pb::ConvertProgressRequest>,
    ) -> Result<Response<ServerStream<pb::ConvertProgress>>, Status> {
        let req = req.into_inner();
        let client = client_of(&req.client_id);
        let stream = handlers::progress_stream(&self.state, &client, &req.job_id);
        Ok(Response::new(Box::pin(stream.map(Ok))))
    }

    /// `ExportCsv`: the CSV is written on the blocking pool into a small channel: at most a few
    /// chunks wait for a slow reader, and a reader that goes away stops the export.
    async fn csv_download(
        &self,
        req: Request<pb::ExportCsvRequest>,
    ) -> Result<Response<ServerStream<pb::FileChunk>>, Status> {
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

    /// `CallJson`: the routed RPC named in the call, its answer as the browser's JSON.
    async fn json_answer(
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

    /// `StreamJson`: the routed streaming RPC named in the call, each message as JSON.
    async fn json_answers(
        &self,
        req: Request<pb::JsonCall>,
    ) -> Result<Response<pb::json::JsonStream>, Status> {
        graph_ascend_proto::json::stream(self, req.into_inner())
            .await
            .map(Response::new)
    }
}

// One handler per RPC, in the proto's order; which of them run on the blocking pool is the proto's
// `blocking` option.
graph_ascend_proto::graph_ascend_service! {
    GraphService {
        load_meta_dir: |state, _| handlers::load_meta_dir(state),
        watch_meta_dir: GraphService::watch_listing,
        load_graph_data: handlers::load_graph_data,
        load_graph_config_info: handlers::load_graph_config_info,
        load_graph_all_node_list: handlers::load_graph_all_node_list,
        change_node_expand_state: |state, req| {
            handlers::change_node_expand_state(state, &client_of(&req.client_id), req)
        },
        update_hierarchy_data: |state, req| {
            handlers::update_hierarchy_data(state, &client_of(&req.client_id), req)
        },
        get_node_info: handlers::get_node_info,
        filter_nodes: handlers::filter_nodes,
        search_nodes: handlers::search_nodes,
        load_graph_matched_relations: handlers::load_graph_matched_relations,
        add_match_nodes: handlers::add_match_nodes,
        delete_match_nodes: handlers::delete_match_nodes,
        add_match_nodes_by_config: handlers::add_match_nodes_by_config,
        save_matched_relations: handlers::save_matched_relations,
        save_data: handlers::save_data,
        update_colors: handlers::update_colors,
        update_precision_error: handlers::update_precision_error,
        load_converted_graph_data: |state, _| handlers::load_converted_graph_data(state),
        convert_to_graph: |state, req| {
            handlers::convert_to_graph(state, &client_of(&req.client_id), req)
        },
        get_convert_progress: GraphService::progress_events,
        get_convert_state: |state, req| {
            handlers::convert_state(state, &client_of(&req.client_id), &req.job_id)
        },
        cancel_convert: |state, req| {
            handlers::cancel_convert(state, &client_of(&req.client_id), &req.job_id)
        },
        diagnose: handlers::diagnose,
        divergence_map: handlers::divergence_map,
        export_csv: GraphService::csv_download,
        call_json: GraphService::json_answer,
        stream_json: GraphService::json_answers,
    }
}
