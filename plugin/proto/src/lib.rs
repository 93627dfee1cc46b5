//! Generated types and service traits of `proto/graph_ascend.proto`.
//!
//! The `.proto` file is the contract between the sidecar and the Python shim; this crate compiles
//! it. `FILE_DESCRIPTOR_SET` is the compiled descriptor, which the shim loads to derive its route
//! table and to turn the browser's requests into messages; [`json`] renders every answer as the
//! browser's JSON and [`rpc`] wraps the sidecar's handlers as the gRPC service (both generated
//! from the same descriptor at build time, as is the page's `frontend/src/generated/proto.ts`).

#![allow(clippy::all, clippy::pedantic)]
#![deny(unsafe_code)]

/// `graph_ascend.v1`: messages and the `GraphAscend` service.
pub mod v1 {
    tonic::include_proto!("graph_ascend.v1");
}

pub use v1::*;

pub mod json;

pub mod rpc;

/// The tests' and fuzz targets' check of [`json`] against serde_json (not used by the sidecar).
#[doc(hidden)]
pub mod json_check;

/// The serialized `FileDescriptorSet` of `graph_ascend.proto` (with its imports).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/graph_ascend_descriptor.bin"));

/// The page's answer and request types and route table, generated from the proto
/// (`build/page_ts.rs`); `frontend/src/generated/proto.ts` is its committed copy, which
/// `tests/generated_ts.rs` keeps equal to it.
#[doc(hidden)]
pub const PAGE_PROTO_TS: &str = include_str!(concat!(env!("OUT_DIR"), "/page_proto.ts"));
