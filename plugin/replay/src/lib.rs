//! Replays the API calls of an msprobe tensor dump on the CPU, at f64, from each call's own
//! dumped inputs, and judges each dumped output against the exact result: msprobe's
//! pre-check numbers (for display) and ours (ULPs of the output dtype against a correct
//! kernel's budget). No Python, no torch, no device.
//!
//! # Layout
//!
//! Data flows one way: a `dump.json` entry → [`call`] (arguments and tensors) → [`ops`] (the
//! exact result and its budget, [`reference`]) → [`verdict`] (ours) and [`msprobe`] (theirs)
//! → [`replay`] (a call's report; a dump's calls).
//!
//! - [`replay`]: one call replayed and judged ([`replay::replay_entry`]), a dump's calls
//!   ([`replay::replay_dump`], [`replay::replay_dump_where`] with a name filter, on
//!   [`replay::with_workers`] threads), finding a dump folder ([`replay::DumpRun`]); autocast is
//!   decided here.
//! - [`call`]: a call's name taken apart, its entry read, its tensors loaded (the `.npy`/`.pt`
//!   readers of `graph-ascend-dump`).
//! - [`args`]: recorded values (tensors, numbers, lists) and positional/keyword access.
//! - [`ops`]: the op table and one file per family — `attention` (scaled_dot_product_attention,
//!   npu_fusion_attention), `conv` (conv1d, conv2d), `matmul` (linear, matmul/mm/bmm,
//!   addmm/baddbmm), `softmax`, `norm` (layer_norm, rms_norm, npu_rms_norm), `loss` (cross_entropy, nll_loss), `activation`
//!   (gelu, silu, npu_swiglu, …), `elementwise`, `reduce`, `gather` (embedding,
//!   index_select, gather), `shape` (cat, view, permute, …), and `common` (broadcasting, rows).
//! - [`reference`]: an op's exact result and its [`reference::Budget`].
//! - [`verdict`]: our numbers (ULP error, bias) and pass/fail against the budget.
//! - [`msprobe`]: msprobe 26.2's metrics and stage-1 status, as its numpy code computes them.
//! - at the bottom: [`dtype`] (formats, rounding, ULP), [`error`] ([`ReplayError`]).
//!
//! `docs/replay.md` lists the supported calls, each op's budget, and what replay cannot decide.

#![deny(unsafe_code)]

pub mod args;
pub mod call;
pub mod dtype;
pub mod error;
pub mod msprobe;
pub mod ops;
pub mod reference;
pub mod replay;
pub mod verdict;

pub use dtype::Dtype;
pub use error::ReplayError;
pub use replay::{
    replay_dump, replay_dump_where, replay_entry, with_workers, CallReport, DumpRun, OutputReport,
    Status,
};
