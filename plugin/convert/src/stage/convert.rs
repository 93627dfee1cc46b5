//! The entry points of a conversion: a plain one ([`super::plain`]) or a parallel merge
//! ([`super::merged`]), whole or one shard of it.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use super::{merged, plain};
use crate::error::ConvertError;
use crate::options::ConvertOptions;
use crate::progress::ProgressFn;
use crate::shard::ShardSpec;

/// Runs one conversion and returns the path of the `.vis.db` written.
pub fn convert(opts: &ConvertOptions, progress: ProgressFn) -> Result<PathBuf, ConvertError> {
    convert_cancellable(opts, progress, &AtomicBool::new(false))
}

/// [`convert`] that stops with [`ConvertError::Cancelled`] soon after `cancel` becomes true
/// (checked before and after each rank's work and between written graphs); the temporary
/// output is removed, nothing is left behind.
pub fn convert_cancellable(
    opts: &ConvertOptions,
    progress: ProgressFn,
    cancel: &AtomicBool,
) -> Result<PathBuf, ConvertError> {
    if !opts.parallel.is_empty() {
        return merged::convert_merged(opts, None, progress, cancel);
    }
    plain::convert_plain(opts, None, progress, cancel)
}

/// [`convert_cancellable`] of only `shard`'s share of the work units, written as a part into the
/// output folder (see [`crate::part`]); returns the part's path. [`crate::gather::gather`] combines the parts.
pub fn convert_shard(
    opts: &ConvertOptions,
    shard: ShardSpec,
    progress: ProgressFn,
    cancel: &AtomicBool,
) -> Result<PathBuf, ConvertError> {
    if opts.json_output {
        return Err(ConvertError::Usage(
            "--shard writes a part of a .vis.db: it does not apply to --file_type json".into(),
        ));
    }
    if !opts.parallel.is_empty() {
        return merged::convert_merged(opts, Some(shard), progress, cancel);
    }
    plain::convert_plain(opts, Some(shard), progress, cancel)
}
