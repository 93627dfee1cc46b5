//! The conversion routes (`docs/msprobe-api.md` §5) over [`crate::convert_jobs`].
//!
//! `getConvertProgress` is a server-streaming RPC (the shim renders it as server-sent events):
//! the job's state now, then every change, ending after the final state. Fixes over msprobe: a
//! stream with no job to follow says so and ends (msprobe sent "building 0%" forever); a failed
//! build ends in `error` (msprobe could report `done` after errors, and never ended a stream
//! whose build crashed); a cancelled build ends in `cancelled`.

use std::pin::Pin;

use graph_ascend_proto as pb;
use tokio_stream::Stream;

use super::reply::{answer, HandlerError};
use crate::convert_jobs::{self, Status};
use crate::messages::{Lang, Msg};
use crate::state::State;

/// `loadConvertedGraphData`: the dump folders and layer-mapping files a conversion may use.
pub fn load_converted_graph_data(state: &State) -> pb::ConvertCandidatesResponse {
    pb::ConvertCandidatesResponse {
        success: true,
        error: None,
        data: Some(convert_jobs::candidates(state.catalog.logdir())),
    }
}

/// `convertToGraph`: starts a conversion (beyond msprobe: answers the job's id).
pub fn convert_to_graph(
    state: &State,
    client: &str,
    req: pb::ConvertRequest,
) -> pb::ConvertStartResponse {
    let started = state
        .conversions
        .start(state.catalog.logdir(), client, &req)
        .map(|job| pb::ConvertStartResponse {
            success: true,
            error: None,
            job_id: Some(job.id.clone()),
        })
        .map_err(HandlerError::Conversion);
    answer(Lang::En, started)
}

/// `cancelConvert`: cancels a job (by id, or the client's newest).
pub fn cancel_convert(state: &State, client: &str, job_id: &str) -> pb::StatusResponse {
    let id = if job_id.is_empty() {
        state.conversions.newest(client).map(|j| j.id.clone())
    } else {
        Some(job_id.to_owned())
    };
    let cancelled = if id.is_some_and(|id| state.conversions.cancel(&id)) {
        Ok(pb::StatusResponse {
            success: true,
            error: None,
        })
    } else {
        Err(HandlerError::Invalid(Msg::ConvertJob))
    };
    answer(Lang::En, cancelled)
}

type Events = Pin<Box<dyn Stream<Item = pb::ConvertProgress> + Send>>;

/// The job a progress request names (by id, or the client's newest), or the final answer that
/// says there is none.
fn job_of(
    state: &State,
    client: &str,
    job_id: &str,
) -> Result<std::sync::Arc<convert_jobs::Job>, Box<pb::ConvertProgress>> {
    let job = if job_id.is_empty() {
        state.conversions.newest(client)
    } else {
        state.conversions.job(job_id)
    };
    job.ok_or_else(|| {
        Box::new(pb::ConvertProgress {
            status: Status::Error.name().to_owned(),
            error: vec![if job_id.is_empty() {
                "No conversion has been started by this page.".to_owned()
            } else {
                format!("No conversion with id {job_id:?}.")
            }],
            job_id: (!job_id.is_empty()).then(|| job_id.to_owned()),
            ..Default::default()
        })
    })
}

/// `getConvertState`: a job's state now (the page polls it when the progress stream stalls,
/// e.g. behind a proxy that holds event streams back).
pub fn convert_state(state: &State, client: &str, job_id: &str) -> pb::ConvertProgress {
    match job_of(state, client, job_id) {
        Ok(job) => job.snapshot().to_message(&job.id),
        Err(none) => *none,
    }
}

/// The progress events of a job (by id, or the client's newest).
pub fn progress_stream(state: &State, client: &str, job_id: &str) -> Events {
    let job = match job_of(state, client, job_id) {
        Ok(job) => job,
        Err(none) => return Box::pin(tokio_stream::iter([*none])),
    };
    let id = job.id.clone();
    let mut rx = job.subscribe();
    Box::pin(async_stream(move |tx| async move {
        loop {
            let snap = rx.borrow_and_update().clone();
            let last = snap.status.is_final();
            if tx.send(snap.to_message(&id)).await.is_err() || last {
                return;
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }))
}

/// A stream fed by a task through a small channel (ends when the task ends).
fn async_stream<F, Fut>(f: F) -> impl Stream<Item = pb::ConvertProgress> + Send
where
    F: FnOnce(tokio::sync::mpsc::Sender<pb::ConvertProgress>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(f(tx));
    tokio_stream::wrappers::ReceiverStream::new(rx)
}
