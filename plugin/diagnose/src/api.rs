//! What the arguments of an API call are: which ones are the layer's weights (parameters, not
//! activations) and what the non-tensor ones are called, per API.
//!
//! A dump names API arguments by position (`input.1`) or keyword (`input.weight`). The positions
//! below are the signatures of `torch.nn.functional` (and MindSpore's `mint.nn.functional`, which
//! follows them). Calls not in the table are still recognised when an argument is one of the
//! enclosing module's parameters (same statistics), see `judge`.

/// The API of a `function_api` node: `Functional.linear.3.forward` → `linear` (msprobe's
/// `split('.')[1]`, with a merged rank's `_rank<r>` suffix removed).
pub fn api_name(node: &str) -> Option<&str> {
    let api = node.split('.').nth(1)?;
    Some(match api.rfind("_rank") {
        Some(i) if api[i + 5..].chars().all(|c| c.is_ascii_digit()) && i + 5 < api.len() => {
            &api[..i]
        }
        _ => api,
    })
}

/// Positions of weight-like tensor arguments, per API: `(position, parameter name)`.
const WEIGHTS: &[(&str, &[(u32, &str)])] = &[
    ("linear", &[(1, "weight"), (2, "bias")]),
    ("dense", &[(1, "weight"), (2, "bias")]),
    ("bilinear", &[(2, "weight"), (3, "bias")]),
    ("conv1d", &[(1, "weight"), (2, "bias")]),
    ("conv2d", &[(1, "weight"), (2, "bias")]),
    ("conv3d", &[(1, "weight"), (2, "bias")]),
    ("conv_transpose1d", &[(1, "weight"), (2, "bias")]),
    ("conv_transpose2d", &[(1, "weight"), (2, "bias")]),
    ("conv_transpose3d", &[(1, "weight"), (2, "bias")]),
    ("embedding", &[(1, "weight")]),
    ("embedding_bag", &[(1, "weight")]),
    ("layer_norm", &[(2, "weight"), (3, "bias")]),
    ("group_norm", &[(2, "weight"), (3, "bias")]),
    ("rms_norm", &[(2, "weight")]),
    ("npu_rms_norm", &[(1, "gamma")]),
    (
        "batch_norm",
        &[
            (1, "running_mean"),
            (2, "running_var"),
            (3, "weight"),
            (4, "bias"),
        ],
    ),
    (
        "instance_norm",
        &[
            (1, "running_mean"),
            (2, "running_var"),
            (3, "weight"),
            (4, "bias"),
        ],
    ),
    ("prelu", &[(1, "weight")]),
];

/// Names of non-tensor arguments by position, per API (for the reasons shown to users).
const ARGUMENTS: &[(&str, &[(u32, &str)])] = &[
    ("layer_norm", &[(1, "normalized_shape"), (4, "eps")]),
    ("group_norm", &[(1, "num_groups"), (4, "eps")]),
    ("rms_norm", &[(1, "normalized_shape"), (3, "eps")]),
    (
        "batch_norm",
        &[(5, "training"), (6, "momentum"), (7, "eps")],
    ),
    (
        "instance_norm",
        &[(5, "use_input_stats"), (6, "momentum"), (7, "eps")],
    ),
    ("dropout", &[(1, "p"), (2, "training"), (3, "inplace")]),
    ("dropout1d", &[(1, "p"), (2, "training"), (3, "inplace")]),
    ("dropout2d", &[(1, "p"), (2, "training"), (3, "inplace")]),
    ("dropout3d", &[(1, "p"), (2, "training"), (3, "inplace")]),
    ("softmax", &[(1, "dim")]),
    ("log_softmax", &[(1, "dim")]),
    ("leaky_relu", &[(1, "negative_slope")]),
    (
        "embedding",
        &[(2, "padding_idx"), (3, "max_norm"), (4, "norm_type")],
    ),
    (
        "conv2d",
        &[
            (3, "stride"),
            (4, "padding"),
            (5, "dilation"),
            (6, "groups"),
        ],
    ),
];

/// Keyword names that always denote a layer's weights.
const WEIGHT_KEYWORDS: &[&str] = &[
    "weight",
    "bias",
    "gamma",
    "beta",
    "running_mean",
    "running_var",
];

/// The argument part of an input key: `input.1` → `Some(Position(1))`, `input.eps` → `Keyword`.
enum Arg<'a> {
    Position(u32),
    Keyword(&'a str),
}

fn argument(key: &str) -> Option<Arg<'_>> {
    let rest = key.strip_prefix("input.")?;
    // Nested arguments (`input.1.0`, a list element) belong to argument 1.
    let first = rest.split('.').next()?;
    Some(match first.parse::<u32>() {
        Ok(i) => Arg::Position(i),
        Err(_) => Arg::Keyword(first),
    })
}

fn lookup(
    table: &[(&str, &[(u32, &'static str)])],
    api: &str,
    position: u32,
) -> Option<&'static str> {
    table
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(api))
        .and_then(|(_, args)| args.iter().find(|(i, _)| *i == position))
        .map(|(_, name)| *name)
}

/// If input `key` of a call to `api` is one of the layer's weights, its parameter name.
pub fn weight_argument(api: &str, key: &str) -> Option<&'static str> {
    match argument(key)? {
        Arg::Position(i) => lookup(WEIGHTS, api, i),
        Arg::Keyword(k) => WEIGHT_KEYWORDS.iter().find(|w| **w == k).copied(),
    }
}

/// A readable name for non-tensor input `key` of `api` (`eps` for `layer_norm`'s `input.4`).
pub fn argument_name<'k>(api: &str, key: &'k str) -> &'k str {
    match argument(key) {
        Some(Arg::Position(i)) => lookup(ARGUMENTS, api, i).unwrap_or(key),
        Some(Arg::Keyword(k)) => k,
        None => key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_names_follow_msprobe() {
        assert_eq!(api_name("Functional.linear.3.forward"), Some("linear"));
        assert_eq!(api_name("Torch.matmul_rank1.3.forward"), Some("matmul"));
        assert_eq!(api_name("Mint.add.0.forward"), Some("add"));
    }

    #[test]
    fn weights_are_known_per_api() {
        assert_eq!(weight_argument("linear", "input.1"), Some("weight"));
        assert_eq!(weight_argument("linear", "input.0"), None);
        assert_eq!(weight_argument("layer_norm", "input.2"), Some("weight"));
        assert_eq!(weight_argument("layer_norm", "input.4"), None);
        assert_eq!(weight_argument("embedding", "input.1"), Some("weight"));
        assert_eq!(weight_argument("conv2d", "input.weight"), Some("weight"));
        assert_eq!(weight_argument("matmul", "input.1"), None);
    }

    #[test]
    fn arguments_are_named() {
        assert_eq!(argument_name("layer_norm", "input.4"), "eps");
        assert_eq!(argument_name("dropout", "input.1"), "p");
        assert_eq!(argument_name("softmax", "input.dim"), "dim");
        assert_eq!(argument_name("gelu", "input.1"), "input.1");
    }
}
