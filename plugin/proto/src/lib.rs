//! Generated types and service traits of `proto/graph_ascend.proto`.
//!
//! The `.proto` file is the contract between the sidecar and the Python shim; this crate compiles
//! it. `FILE_DESCRIPTOR_SET` is the compiled descriptor, which the shim loads to derive its route
//! table and to turn the browser's requests into messages; [`json`] renders every answer as the
//! browser's JSON (generated from the same descriptor at build time).

#![allow(clippy::all, clippy::pedantic)]
#![deny(unsafe_code)]

/// `graph_ascend.v1`: messages and the `GraphAscend` service.
pub mod v1 {
    tonic::include_proto!("graph_ascend.v1");
}

pub use v1::*;

pub mod json;

/// The tests' and fuzz targets' check of [`json`] against serde_json (not used by the sidecar).
#[doc(hidden)]
pub mod json_check;

/// The serialized `FileDescriptorSet` of `graph_ascend.proto` (with its imports).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/graph_ascend_descriptor.bin"));
