//! The gRPC edge: the `GraphAscend` service of the proto, over [`crate::handlers`].
//!
//! The wrapper of each routed unary RPC is generated from the proto
//! ([`graph_ascend_proto::graph_ascend_service!`], invoked at the end of this file with one handler
//! per RPC): it runs the handler through [`GraphService::quick`], right on the runtime's worker
//! thread, or, for the RPCs the proto marks `option (blocking) = true` (the handlers that may wait
//! long: index builds, file writes, conversions, the logdir walk), through
//! [`GraphService::blocking`], on the blocking pool, or, for those marked `option (heavy) = true`
//! (the layouts, whose work grows with the file), through [`GraphService::heavy`], on the
//! [`HeavyLane`]: quick requests never wait behind long work. Only a failure of the server itself (a
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
use crate::heavy_lane::HeavyLane;
use crate::state::State;

/// The service object tonic serves.
#[derive(Clone)]
pub struct GraphService {
    state: Arc<State>,
    heavy: Arc<HeavyLane>,
}

impl GraphService {
    /// The service of `state`, with a heavy lane of the default size
    /// ([`HeavyLane::default_threads`]).
    pub fn new(state: Arc<State>) -> GraphService {
        GraphService {
            state,
            heavy: Arc::new(HeavyLane::new(HeavyLane::default_threads())),
        }
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

    /// Runs a handler whose work grows with the file (a layout: the RPCs marked `heavy` in the
    /// proto) on the [`HeavyLane`], after the heavy requests before it, holding no worker
    /// meanwhile; a panicking handler becomes an `internal` status, as elsewhere.
    async fn heavy<T: Send + 'static>(
        &self,
        f: impl FnOnce(&State) -> T + Send + 'static,
    ) -> Result<Response<T>, Status> {
        let state = self.state.clone();
        match self.heavy.run(move || run_caught(&state, f)).await {
            Ok(answered) => answered,
            Err(e) => Err(handler_failed(&e)),
        }
    }

    /// Runs a handler whose work is bounded by the answer it makes (the page's opening requests
    /// and its clicks: a file's configuration, a node's details; the RPCs marked neither
    /// `blocking` nor `heavy` in the proto) right on the runtime's worker thread, like the JSON of
    /// every answer but the biggest. It waits for no background build and writes no file.
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

/// `CallJson`'s answers of `RENDERED_ASIDE_BYTES` or more (a root of 100,000 children is tens of
/// MB of JSON) are rendered on the [`HeavyLane`], like the work that made them: never on the
/// workers that answer other clients' quick requests.
#[tonic::async_trait]
impl graph_ascend_proto::json::RenderAside for GraphService {
    async fn render_aside(
        &self,
        render: graph_ascend_proto::json::Render,
    ) -> Result<pb::JsonAnswer, Status> {
        self.heavy.run(render).await.map_err(|e| handler_failed(&e))
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

    /// `ExportReport`: the report is made on the blocking pool and sent in chunks, as the CSV.
    async fn report_download(
        &self,
        req: Request<pb::ExportReportRequest>,
    ) -> Result<Response<ServerStream<pb::FileChunk>>, Status> {
        let req = req.into_inner();
        let state = self.state.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let created = crate::report_page::utc_now();
        tokio::task::spawn_blocking(move || {
            handlers::export_report(&state, req, created, &mut |chunk| {
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

// One handler per RPC, in the proto's order; which of them run on the blocking pool or the heavy
// lane is the proto's `blocking` and `heavy` options.
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
        export_report: GraphService::report_download,
        call_json: GraphService::json_answer,
        stream_json: GraphService::json_answers,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use graph_ascend_testkit::synthetic_visdb::{write, Shape};
    use prost::Message;

    use super::*;

    fn call(run: &str, method: &str) -> pb::JsonCall {
        let meta = pb::MetaData {
            run: run.into(),
            tag: run.into(),
            r#type: "db".into(),
            lang: "en".into(),
            micro_step: Some(-1),
            step: Some(0),
            rank: Some(0),
        };
        pb::JsonCall {
            method: method.into(),
            request: pb::MetaRequest {
                meta_data: Some(meta),
                client_id: "test".into(),
            }
            .encode_to_vec(),
        }
    }

    /// A legitimately huge answer (the names of a root's 100,000 children: over
    /// `RENDERED_ASIDE_BYTES` of JSON) is rendered on the heavy lane, not on the runtime's
    /// worker: with the lane's only thread held, its rendering waits there, and a quick request
    /// of another file is answered by the only worker meanwhile. Rendered on the worker, the big
    /// answer would never reach the lane (the wait below would not end).
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_huge_answer_is_rendered_on_the_heavy_lane() {
        let dir = tempfile::tempdir().expect("tempdir");
        let logdir = dir.path().canonicalize().expect("real path");
        for run in ["wide", "small"] {
            std::fs::create_dir_all(logdir.join(run)).expect("run folder");
        }
        let wide = Shape {
            layers: 100_000,
            modules: 0,
            leaves: 0,
            compare: false,
            steps: 1,
            ranks: 1,
        };
        write(&logdir.join("wide/wide.vis.db"), wide).expect("wide file");
        write(
            &logdir.join("small/small.vis.db"),
            Shape::with_nodes(200, 3, false),
        )
        .expect("small file");
        let service = GraphService {
            state: Arc::new(State::new(logdir)),
            heavy: Arc::new(HeavyLane::new(1)),
        };

        // The lane's only thread, held until released.
        let (started, running) = tokio::sync::oneshot::channel::<()>();
        let (release, held) = std::sync::mpsc::channel::<()>();
        let lane = service.heavy.clone();
        let holder = tokio::spawn(async move {
            lane.run(move || {
                let _ = started.send(());
                held.recv().expect("released");
            })
            .await
        });
        running.await.expect("the holder runs");

        let big = {
            let service = service.clone();
            tokio::spawn(async move {
                graph_ascend_proto::json::call(&service, call("wide", "LoadGraphAllNodeList")).await
            })
        };
        let queued = async {
            while service.heavy.waiting() == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(120), queued)
            .await
            .expect("the big answer's rendering reaches the heavy lane");
        assert!(!big.is_finished(), "rendered only once the lane is free");

        let quick = graph_ascend_proto::json::call(&service, call("small", "LoadGraphConfigInfo"))
            .await
            .expect("the quick answer, while the big one waits to be rendered");
        let quick: serde_json::Value = serde_json::from_slice(&quick.json).expect("JSON");
        assert_eq!(quick["success"], true, "{quick}");

        release.send(()).expect("release");
        holder.await.expect("join").expect("holder ran");
        let big = big.await.expect("join").expect("the big answer");
        assert!(big.json.len() >= graph_ascend_proto::json::RENDERED_ASIDE_BYTES);
        let big: serde_json::Value = serde_json::from_slice(&big.json).expect("JSON");
        assert_eq!(big["success"], true, "{}", big["error"]);
    }
}
