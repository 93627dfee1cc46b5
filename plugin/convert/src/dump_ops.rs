//! A rank's dump.json read into its ops' items ([`DumpOps`]), entry by entry as batches are
//! parsed.

use rayon::prelude::*;

use graph_ascend_dump::fastjson::EntryBatch;
use graph_ascend_dump::{parse_op, parse_op_packed, Confine, DumpFile, FastMap, PackedOp};

use crate::entries::EntrySpan;
use crate::error::ConvertError;
use crate::node::parameters_grad_prefix;

/// Raw JSON per parallel parsing batch of dump.json (memory: a few batches plus their parsed
/// ops).
const PARSE_BATCH_BYTES: usize = 1 << 20;

/// Batches the scanner may cut ahead of the parser.
const BATCHES_AHEAD: usize = 2;

/// The entries of one dump.json, already flattened into items (see [`DumpOps::read`]).
#[derive(Debug, Default)]
pub struct DumpOps {
    /// `op name → items` (packed); the graph takes each op's items when it creates the node.
    pub ops: FastMap<String, PackedOp>,
    /// `op name → where its entry lies in dump.json`, for the ops whose items are read again
    /// when needed (see [`crate::entries`]) instead of held in `ops`.
    pub spans: FastMap<String, EntrySpan>,
    /// Op names in file order.
    pub order: Vec<String>,
    /// Overflow level of each anomalous op (filled only when asked for).
    pub overflow: FastMap<String, &'static str>,
    /// Whether any tensor carries an `md5` (msprobe's md5 summary mode).
    pub md5: bool,
}

impl DumpOps {
    /// Streams `dump.json`: each entry is flattened (and graded for overflow when
    /// `overflow_check`) as soon as it is parsed, so no parsed tree of the whole file is ever
    /// held. The fast reader is tried first; a file it does not accept is read again by the
    /// `serde_json` reader, which reports the problem. `on_bytes` is told how many more bytes
    /// of the file were read, as batches are parsed (the whole file in the end); when it answers
    /// `false` the reading stops with [`ConvertError::Cancelled`] (a conversion is cancelled
    /// within a batch, not after the whole file).
    pub fn read(
        path: &std::path::Path,
        confine: &Confine,
        overflow_check: bool,
        on_bytes: &(dyn Fn(u64) -> bool + Sync),
    ) -> Result<(DumpFile, DumpOps), ConvertError> {
        DumpOps::read_with(
            path,
            confine,
            overflow_check,
            false,
            &mut |_, _| false,
            on_bytes,
        )
    }

    /// [`DumpOps::read`]; with `spans`, the entries the fast reader accepts are kept as their
    /// places in the file (`spans`), not as items (`ops`), except those that `place` takes
    /// (it answers `true`: a skeleton's node took the span, see [`crate::graph::Skeleton::place`]; their
    /// names are not kept at all).
    pub fn read_with(
        path: &std::path::Path,
        confine: &Confine,
        overflow_check: bool,
        spans: bool,
        place: &mut dyn FnMut(&str, EntrySpan) -> bool,
        on_bytes: &(dyn Fn(u64) -> bool + Sync),
    ) -> Result<(DumpFile, DumpOps), ConvertError> {
        let mut ops = DumpOps::default();
        let mut reported: u64 = 0;
        let mut report_to = |offset: u64| {
            let delta = offset.saturating_sub(reported);
            reported = reported.max(offset);
            on_bytes(delta)
        };
        let mut stopped = false;
        // A scanner thread cuts the file into batches of entries (a sequential walk over the
        // JSON) while this one parses and packs the previous batch on every core, then takes
        // its entries in file order.
        let (tx, rx) = std::sync::mpsc::sync_channel::<EntryBatch>(BATCHES_AHEAD);
        let (scanned, parsed) = std::thread::scope(|scope| {
            let scanner = scope.spawn(move || {
                DumpFile::read_fast_batches(path, confine, PARSE_BATCH_BYTES, &mut |batch| {
                    tx.send(batch.take(PARSE_BATCH_BYTES + PARSE_BATCH_BYTES / 4))
                        .map_err(|_| graph_ascend_dump::fastjson::FastError {
                            offset: 0,
                            message: "the parser stopped",
                        })
                })
            });
            let mut parsed = Ok(());
            for batch in rx.iter() {
                if let Err(e) = ops.add_batch(&batch, overflow_check, spans, place) {
                    // Dropping the receiver stops the scanner at its next batch.
                    parsed = Err(e);
                    break;
                }
                if !report_to(batch.end_offset() as u64) {
                    stopped = true;
                    break;
                }
            }
            drop(rx);
            let scanned = scanner.join().unwrap_or(Ok(None));
            (scanned, parsed)
        });
        if stopped {
            return Err(ConvertError::Cancelled);
        }
        let fast = match (scanned?, parsed) {
            (Some(header), Ok(())) => Some(header),
            // The fast reader refused the file, or the parser an entry: the full reader decides.
            _ => None,
        };
        let file_size = std::fs::metadata(path).map_or(0, |m| m.len());
        if let Some(header) = fast {
            return if report_to(file_size) {
                Ok((header, ops))
            } else {
                Err(ConvertError::Cancelled)
            };
        }
        let mut ops = DumpOps::default();
        let header = DumpFile::read_streaming(path, confine, &mut |name, entry| {
            if !ops.md5 && graph_ascend_dump::dumpfile::entry_has_md5(&entry) {
                ops.md5 = true;
            }
            if overflow_check {
                if let Some(level) = crate::overflow::level_of(&name, &entry) {
                    ops.overflow.insert(name.clone(), level);
                }
            }
            let data = PackedOp::pack(parse_op(&name, &entry));
            ops.order.push(name.clone());
            ops.ops.insert(name, data);
        })?;
        if !report_to(file_size) {
            return Err(ConvertError::Cancelled);
        }
        Ok((header, ops))
    }

    /// Parses and packs a batch of entries in parallel, then adds them in file order.
    fn add_batch(
        &mut self,
        batch: &EntryBatch,
        overflow_check: bool,
        spans: bool,
        place: &mut dyn FnMut(&str, EntrySpan) -> bool,
    ) -> Result<(), graph_ascend_dump::fastjson::FastError> {
        let parsed: Vec<_> = (0..batch.len())
            .into_par_iter()
            .map(|i| {
                let entry = batch.parse(i)?;
                let name = batch.name(i);
                let md5 = graph_ascend_dump::dumpfile::jval_has_md5(&entry);
                let level = if overflow_check {
                    crate::overflow::level_of(name, &entry.to_value())
                } else {
                    None
                };
                let data = parse_op_packed(name, &entry);
                let has_items = !(data.input.is_empty() && data.output.is_empty());
                let span = batch
                    .span(i)
                    .filter(|_| spans)
                    .and_then(|(offset, len)| EntrySpan::new(offset, len, has_items));
                let data = match span {
                    Some(span) => Err(span),
                    None => Ok(data),
                };
                Ok((md5, level, data))
            })
            .collect::<Result<_, graph_ascend_dump::fastjson::FastError>>()?;
        for (i, (md5, level, data)) in parsed.into_iter().enumerate() {
            let name = batch.name(i);
            self.md5 |= md5;
            if let Some(level) = level {
                self.overflow.insert(name.to_string(), level);
            }
            // Only parameter-gradient keys are looked up in file order (`add_parameters_grad`);
            // a reading that keeps spans keeps no other name twice.
            if !spans || parameters_grad_prefix(name).is_some() {
                self.order.push(name.to_string());
            }
            match data {
                Ok(items) => {
                    self.ops.insert(name.to_string(), items);
                }
                Err(span) => {
                    if !place(name, span) {
                        self.spans.insert(name.to_string(), span);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dump.json of `n` entries (several parsing batches for a few thousand).
    fn big_dump(n: usize, bad_entry: Option<usize>) -> String {
        let mut text = String::from("{\"task\": \"statistics\", \"level\": \"mix\", \"data\": {");
        for i in 0..n {
            if i > 0 {
                text.push_str(", ");
            }
            if bad_entry == Some(i) {
                text.push_str(&format!("\"Torch.bad.{i}.forward\": 5"));
                continue;
            }
            text.push_str(&format!(
                "\"Functional.linear.{i}.forward\": {{\"input_args\": [{{\"type\": \"torch.Tensor\", \"dtype\": \"torch.float32\", \"shape\": [{i}, 64], \"Max\": {}.5, \"Min\": -1.25, \"Mean\": 0.1, \"Norm\": 3.0, \"requires_grad\": true, \"data_name\": \"-1\"}}, {{\"type\": \"int\", \"value\": {i}}}], \"output\": [{{\"type\": \"torch.Tensor\", \"dtype\": \"torch.bfloat16\", \"shape\": [64], \"Max\": 1e-{}, \"Min\": null, \"Mean\": NaN, \"Norm\": Infinity, \"requires_grad\": false}}], \"padding\": \"{}\"}}",
                i % 97,
                i % 300,
                "x".repeat(200)
            ));
        }
        text.push_str("}}");
        text
    }

    /// Regression for the pipelined reader: many batches arrive in file order and equal the
    /// entry-by-entry reader's items; an entry the fast reader refuses, far into the file, gets
    /// the full reader's error.
    #[test]
    fn pipelined_reading_equals_the_full_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.json");
        let text = big_dump(12_000, None);
        assert!(text.len() > 4 * PARSE_BATCH_BYTES, "{}", text.len());
        std::fs::write(&path, &text).unwrap();
        // Progress: bytes are reported batch by batch, growing, and add up to the file.
        let reports = std::sync::Mutex::new(Vec::new());
        let (_, fast) = DumpOps::read(
            &path,
            &graph_ascend_dump::Confine::anywhere(),
            false,
            &|n| {
                reports.lock().unwrap().push(n);
                true
            },
        )
        .unwrap();
        let reports = reports.into_inner().unwrap();
        assert!(reports.len() > 4, "{} reports", reports.len());
        assert_eq!(reports.iter().sum::<u64>(), text.len() as u64);
        let mut full = DumpOps::default();
        DumpFile::read_streaming(
            &path,
            &graph_ascend_dump::Confine::anywhere(),
            &mut |name, entry| {
                full.md5 |= graph_ascend_dump::dumpfile::entry_has_md5(&entry);
                full.order.push(name.clone());
                full.ops
                    .insert(name.clone(), PackedOp::pack(parse_op(&name, &entry)));
            },
        )
        .unwrap();
        assert_eq!(full.order.len(), 12_000);
        assert_eq!(fast.order, full.order);
        assert_eq!(fast.ops, full.ops);
        assert_eq!(fast.md5, full.md5);

        std::fs::write(&path, big_dump(12_000, Some(11_000))).unwrap();
        let err = DumpOps::read(
            &path,
            &graph_ascend_dump::Confine::anywhere(),
            false,
            &|_| true,
        )
        .expect_err("an entry that is a number");
        assert!(err.to_string().contains("dump.json"), "{err}");
    }

    /// A cancel stops the reading of a big dump.json within a batch.
    #[test]
    fn reading_stops_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.json");
        std::fs::write(&path, big_dump(12_000, None)).unwrap();
        let batches = std::sync::atomic::AtomicUsize::new(0);
        let err = DumpOps::read(
            &path,
            &graph_ascend_dump::Confine::anywhere(),
            false,
            &|_| batches.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 1,
        )
        .expect_err("stopped");
        assert!(matches!(err, ConvertError::Cancelled), "{err}");
        assert_eq!(
            batches.into_inner(),
            2,
            "stopped at the batch after the answer"
        );
    }
}
