//! The sidecar's RPC wrappers, generated from the proto (`build/rpc.rs`): the macro
//! [`graph_ascend_service!`](crate::graph_ascend_service) implements the tonic trait
//! `GraphAscend` for a service type, given one handler per RPC in the proto's order.
//!
//! ```ignore
//! graph_ascend_proto::graph_ascend_service! {
//!     GraphService {
//!         load_meta_dir: |state, _| handlers::load_meta_dir(state),
//!         watch_meta_dir: GraphService::watch_listing,
//!         load_graph_data: handlers::load_graph_data,
//!         // ... every RPC of the service
//!     }
//! }
//! ```
//!
//! - A routed unary RPC takes a handler `FnOnce(&State, Request) -> Answer` (a function or a
//!   closure). The generated method takes the request message out of tonic's request and runs the
//!   handler through the service's `fn quick(&self, f) -> Result<Response<T>, Status>` (on the
//!   runtime's worker), or, for an RPC marked `option (blocking) = true` in the proto, through its
//!   `async fn blocking(&self, f) -> Result<Response<T>, Status>` (on the blocking pool), or, for
//!   one marked `option (heavy) = true`, through its `async fn heavy(&self, f)` (on the service's
//!   heavy lane). All take `f: impl FnOnce(&State) -> T`; which one runs an RPC is said once, in
//!   the proto.
//! - Every other RPC (server streams, `download` routes, `CallJson`/`StreamJson`) takes an async
//!   function of the service with the trait method's signature, `(&Self, Request<R>)`; a stream's
//!   type is [`ServerStream`] of its message.
//!
//! A handler missing, extra or out of order is a compile error at the macro's call.

use std::pin::Pin;

use tokio_stream::Stream;

pub use tonic::{async_trait, Request, Response, Status};

/// The stream a server-streaming RPC answers with.
pub type ServerStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// Gives a routed RPC's handler its type, `FnOnce(&S, Req) -> Answer`, so that a closure's
/// arguments are known where the macro's caller writes it (used by the generated methods).
#[doc(hidden)]
pub fn handler<S: ?Sized, Req, Answer, F>(f: F) -> F
where
    F: FnOnce(&S, Req) -> Answer + Send + 'static,
{
    f
}

include!(concat!(env!("OUT_DIR"), "/rpc_service.rs"));
