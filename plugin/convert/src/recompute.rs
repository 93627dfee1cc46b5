//! How msprobe recognises a recomputed module at the top level of a graph (activation
//! checkpointing, `GraphBuilder._handle_recompute`): by the frames of its call and by the shape
//! of its id. The move itself is [`crate::graph::Graph`]'s (docs/msprobe-converter.md §3).
//!
//! A recomputation runs the checkpointed modules again during backward. A collector that sees a
//! module call open at that time (msprobe 26.2's, with backward pre-hooks) puts the recomputed
//! calls under it; older collectors and custom checkpoint functions leave them at the top level,
//! where msprobe's graph builder finds them and moves each under the backward call of the
//! module that holds the same layer's first-run forward call.

/// Whether a call's frames (stack.json's strings, `File <path>, line <n>, in <function>, \n
/// <code>`) show a recomputation: a `recompute_fn` frame of `torch/utils/checkpoint.py`
/// (torch's non-reentrant checkpoint), or a `backward` frame (or Megatron's
/// `checkpoint_function_backward`) called one or two frames further by
/// `torch/autograd/function.py` (a reentrant checkpoint's custom backward: torch's, Megatron's,
/// MindSpeed's). `_is_recompute_by_stack_torch`, frames parsed as it parses them (a frame it
/// cannot parse is left out).
pub(crate) fn called_from_recompute(frames: &[String]) -> bool {
    let parsed: Vec<(String, String)> = frames.iter().filter_map(|f| parse_frame(f)).collect();
    if parsed.iter().any(|(file, function)| {
        function == "recompute_fn" && file.ends_with("torch/utils/checkpoint.py")
    }) {
        return true;
    }
    let from_autograd = |i: usize| {
        parsed
            .get(i)
            .is_some_and(|(file, _)| file.ends_with("torch/autograd/function.py"))
    };
    parsed.iter().enumerate().any(|(i, (file, function))| {
        let backward = function == "backward"
            || (function == "checkpoint_function_backward" && file.contains("megatron"));
        backward && (from_autograd(i + 1) || from_autograd(i + 2))
    })
}

/// A frame's file and function as msprobe reads them: `File ` removed wherever it is, the file
/// up to the first `, line `, the function between the first `, in ` and the next comma.
fn parse_frame(frame: &str) -> Option<(String, String)> {
    let text = frame.trim().replace("File ", "");
    let file = text.split(", line ").next().unwrap_or("").trim();
    let function = text.split(", in ").nth(1)?.split(',').next()?.trim();
    Some((file.to_string(), function.to_string()))
}

/// Whether a top-level module's id (split at dots) is not the id of a module called from the
/// model's own forward: such ids read `Module|Cell.{number?}.name.{number?}.Class.forward|backward.N`
/// (at most 7 segments, the 2nd and 4th numbers when there are 7, the 2nd not a number when
/// there are 6); anything longer, or of that length otherwise, is a recomputed call's.
/// `_is_recompute_node_id`.
pub(crate) fn looks_recomputed(segments: &[&str]) -> bool {
    let number = |i: usize| {
        segments
            .get(i)
            .is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit()))
    };
    match segments.len() {
        n if n > 7 => true,
        7 => !(number(1) && number(3)),
        6 => !number(1),
        _ => false,
    }
}

/// The id of a call's twin in the other direction: the next-to-last segment made `backward` if
/// it is `forward`, else `forward` (msprobe's flip).
pub(crate) fn twin_id(segments: &[&str]) -> Option<String> {
    let k = segments.len().checked_sub(2)?;
    let mut twin: Vec<&str> = segments.to_vec();
    twin[k] = if twin[k] == "forward" {
        "backward"
    } else {
        "forward"
    };
    Some(twin.join("."))
}

/// A call's id without its last two segments (`forward|backward.N`): the module it calls.
pub(crate) fn module_of(segments: &[&str]) -> String {
    segments[..segments.len().saturating_sub(2)].join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn stacks_of_torch_and_custom_checkpoints() {
        // torch's non-reentrant checkpoint.
        assert!(called_from_recompute(&frames(&[
            "File /opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py, line 1845, in _call_impl, \n return inner()",
            "File /opt/venv/lib/python3.11/site-packages/torch/utils/checkpoint.py, line 1129, in recompute_fn, \n fn(*args, **kwargs)",
        ])));
        // A reentrant checkpoint: CheckpointFunction.backward called by autograd.
        let reentrant = frames(&[
            "File /opt/venv/lib/python3.11/site-packages/torch/utils/checkpoint.py, line 319, in backward, \n outputs = ctx.run_function(*detached_inputs)",
            "File /opt/venv/lib/python3.11/site-packages/torch/autograd/function.py, line 307, in apply, \n return user_fn(self, *args)",
        ]);
        assert!(called_from_recompute(&reentrant));
        // Two frames further counts; three does not.
        let mut two = reentrant.clone();
        two.insert(
            1,
            "File /home/user/train/wrap.py, line 3, in wrapped, \n x".into(),
        );
        assert!(called_from_recompute(&two));
        let mut three = two.clone();
        three.insert(
            1,
            "File /home/user/train/wrap.py, line 4, in again, \n x".into(),
        );
        assert!(!called_from_recompute(&three));
        // Megatron's own backward function, in a megatron file.
        assert!(called_from_recompute(&frames(&[
            "File /opt/megatron/core/tensor_parallel/random.py, line 270, in checkpoint_function_backward, \n x",
            "File /opt/venv/lib/python3.11/site-packages/torch/autograd/function.py, line 307, in apply, \n x",
        ])));
        assert!(!called_from_recompute(&frames(&[
            "File /opt/other/random.py, line 270, in checkpoint_function_backward, \n x",
            "File /opt/venv/lib/python3.11/site-packages/torch/autograd/function.py, line 307, in apply, \n x",
        ])));
        // A plain forward call, and frames msprobe cannot parse.
        assert!(!called_from_recompute(&frames(&[
            "File /home/user/train/train.py, line 10, in main, \n loss = model(x)",
            "no frame here",
        ])));
        assert!(!called_from_recompute(&[]));
    }

    #[test]
    fn ids_of_recomputed_calls() {
        let seg = |id: &'static str| id.split('.').collect::<Vec<_>>();
        // Called from the model's forward: Module.name.Class.forward.N and the numbered forms.
        assert!(!looks_recomputed(&seg("Module.decoder.Decoder.forward.0")));
        assert!(!looks_recomputed(&seg(
            "Module.0.decoder.Decoder.forward.0"
        )));
        assert!(!looks_recomputed(&seg(
            "Module.0.decoder.1.Decoder.forward.0"
        )));
        // A layer's block run again at the top level.
        assert!(looks_recomputed(&seg(
            "Module.decoder.layers.0.Block.forward.1"
        )));
        assert!(looks_recomputed(&seg("Module.layers.0.Block.forward.1")));
        assert!(looks_recomputed(&seg(
            "Module.0.module.decoder.layers.0.TransformerLayer.forward.4"
        )));
        assert_eq!(
            twin_id(&seg("Module.layers.0.Block.forward.1")).as_deref(),
            Some("Module.layers.0.Block.backward.1")
        );
        assert_eq!(
            twin_id(&seg("Module.layers.0.Block.backward.1")).as_deref(),
            Some("Module.layers.0.Block.forward.1")
        );
        assert_eq!(
            module_of(&seg("Module.layers.0.Block.backward.1")),
            "Module.layers.0.Block"
        );
    }
}
