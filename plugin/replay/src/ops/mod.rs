//! The op families, one file each, and the table from an API name to its reference.
//!
//! Every op computes its exact result in f64 from the (loaded, possibly autocast) inputs and
//! says what a correct kernel's error may be ([`crate::reference::Budget`]).

pub mod activation;
pub mod attention;
pub mod common;
pub mod context;
pub mod conv;
pub mod elementwise;
pub mod gather;
pub mod loss;
pub mod matmul;
pub mod norm;
pub mod reduce;
pub mod shape;
pub mod softmax;

use crate::args::CallArgs;
use crate::error::Result;
use crate::reference::Reference;

pub use context::Context;
use elementwise::{Arith, Unary};

/// The API name without torch's decorations: `__add__` → `add`, `add_` → `add`, with whether
/// it is the reflected form (`__radd__`, `rsub`).
pub fn normalize(api: &str) -> (String, bool) {
    let lower = api.to_ascii_lowercase();
    if let Some(inner) = lower.strip_prefix("__").and_then(|s| s.strip_suffix("__")) {
        for (prefix, reflected) in [("r", true), ("i", false)] {
            if let Some(base) = inner.strip_prefix(prefix) {
                if matches!(
                    base,
                    "add" | "sub" | "mul" | "truediv" | "div" | "matmul" | "pow"
                ) {
                    return (base.to_string(), reflected);
                }
            }
        }
        return (inner.to_string(), false);
    }
    let base = lower.strip_suffix('_').unwrap_or(&lower).to_string();
    if base == "rsub" {
        return ("sub".into(), true);
    }
    (base, false)
}

/// Why a call is random (its output cannot be replayed), or `None`.
pub fn random_reason(api: &str, args: &CallArgs) -> Option<String> {
    let (name, _) = normalize(api);
    if name.contains("dropout") {
        let p = args.f64_or(1, "p", 0.5).unwrap_or(0.5);
        let training = args.bool_or(2, "training", true).unwrap_or(true);
        if p > 0.0 && training {
            return Some(format!("random (dropout p={p} in training)"));
        }
        return None;
    }
    if name == "scaled_dot_product_attention" {
        let p = args.f64_or(4, "dropout_p", 0.0).unwrap_or(0.0);
        return (p > 0.0).then(|| format!("random (scaled_dot_product_attention dropout_p={p})"));
    }
    if name == "npu_fusion_attention" {
        let keep = args.f64_or(usize::MAX, "keep_prob", 1.0).unwrap_or(1.0);
        return (keep < 1.0)
            .then(|| format!("random (npu_fusion_attention keep_prob={keep} < 1: dropout)"));
    }
    let random = [
        "rand",
        "randn",
        "randint",
        "randperm",
        "normal",
        "uniform",
        "bernoulli",
        "multinomial",
        "exponential",
        "random",
        "npu_dropout_gen_mask",
    ];
    random
        .contains(&name.as_str())
        .then(|| format!("random ({name} draws random numbers)"))
}

/// Why a call whose name matches an op is still not replayed, from its prefix: `None` when it
/// is. `torch.batch_norm` takes `weight` and `bias` before the running statistics, which the
/// op (`torch.nn.functional.batch_norm`'s order) would misread.
pub fn form_reason(prefix: &str, api: &str) -> Option<String> {
    let (name, _) = normalize(api);
    (name == "batch_norm" && matches!(prefix, "Torch" | "Aten")).then(|| {
        format!(
            "{prefix}.batch_norm's argument order (weight and bias before the running statistics) is not replayed yet; Functional.batch_norm is"
        )
    })
}

/// A family's entry point: the call's arguments, whether it is the reflected form, the context.
pub type OpFn = fn(&CallArgs, bool, Context) -> Result<Vec<Reference>>;

/// Every op name this crate replays (after [`normalize`]) and its reference. `docs/replay.md`
/// lists the same names (a test keeps them equal).
pub const OPS: &[(&str, OpFn)] = &[
    ("linear", |a, _, _| matmul::linear(a)),
    ("matmul", |a, r, _| matmul::matmul(a, r)),
    ("mm", |a, r, _| matmul::matmul(a, r)),
    ("bmm", |a, r, _| matmul::matmul(a, r)),
    ("addmm", |a, _, _| matmul::addmm(a)),
    ("baddbmm", |a, _, _| matmul::addmm(a)),
    ("softmax", |a, _, _| softmax::softmax(a)),
    ("log_softmax", |a, _, _| softmax::log_softmax(a)),
    ("layer_norm", |a, _, _| norm::layer_norm(a)),
    ("rms_norm", |a, _, _| norm::rms_norm(a)),
    ("npu_rms_norm", |a, _, _| norm::npu_rms_norm(a)),
    ("npu_add_rms_norm", |a, _, c| norm::npu_add_rms_norm(a, c)),
    ("group_norm", |a, _, _| norm::group_norm(a)),
    ("batch_norm", |a, _, _| norm::batch_norm(a)),
    ("conv1d", |a, _, _| conv::conv(a, 1)),
    ("conv2d", |a, _, _| conv::conv(a, 2)),
    ("scaled_dot_product_attention", |a, _, c| {
        attention::scaled_dot_product_attention(a, c)
    }),
    ("npu_fusion_attention", |a, _, c| {
        attention::npu_fusion_attention(a, c)
    }),
    ("gelu", |a, _, _| activation::gelu(a)),
    ("npu_fast_gelu", |a, _, _| activation::fast_gelu(a)),
    ("fast_gelu", |a, _, _| activation::fast_gelu(a)),
    ("silu", |a, _, _| activation::silu_op(a)),
    ("npu_swiglu", |a, _, c| activation::swiglu(a, c.below_fp32)),
    ("relu", |a, _, _| activation::relu(a)),
    ("sigmoid", |a, _, _| activation::sigmoid_op(a)),
    ("tanh", |a, _, _| activation::tanh_op(a)),
    ("add", |a, r, _| elementwise::arith(a, Arith::Add, r)),
    ("sub", |a, r, _| elementwise::arith(a, Arith::Sub, r)),
    ("subtract", |a, r, _| elementwise::arith(a, Arith::Sub, r)),
    ("mul", |a, r, _| elementwise::arith(a, Arith::Mul, r)),
    ("multiply", |a, r, _| elementwise::arith(a, Arith::Mul, r)),
    ("div", |a, r, _| elementwise::arith(a, Arith::Div, r)),
    ("truediv", |a, r, _| elementwise::arith(a, Arith::Div, r)),
    ("true_divide", |a, r, _| {
        elementwise::arith(a, Arith::Div, r)
    }),
    ("divide", |a, r, _| elementwise::arith(a, Arith::Div, r)),
    ("pow", |a, r, _| elementwise::arith(a, Arith::Pow, r)),
    ("exp", |a, _, _| elementwise::unary(a, Unary::Exp)),
    ("log", |a, _, _| elementwise::unary(a, Unary::Log)),
    ("sqrt", |a, _, _| elementwise::unary(a, Unary::Sqrt)),
    ("rsqrt", |a, _, _| elementwise::unary(a, Unary::Rsqrt)),
    ("neg", |a, _, _| elementwise::unary(a, Unary::Neg)),
    ("negative", |a, _, _| elementwise::unary(a, Unary::Neg)),
    ("abs", |a, _, _| elementwise::unary(a, Unary::Abs)),
    ("npu_rotary_mul", |a, _, _| elementwise::rotary_mul(a)),
    ("where", |a, _, _| elementwise::where_op(a)),
    ("masked_fill", |a, _, _| elementwise::masked_fill(a)),
    ("sum", |a, _, _| reduce::sum(a, reduce::Sum::Sum)),
    ("mean", |a, _, _| reduce::sum(a, reduce::Sum::Mean)),
    ("max", |a, _, _| reduce::extremum(a, true)),
    ("amax", |a, _, _| reduce::extremum(a, true)),
    ("min", |a, _, _| reduce::extremum(a, false)),
    ("amin", |a, _, _| reduce::extremum(a, false)),
    ("var", |a, _, _| reduce::variance(a, false)),
    ("std", |a, _, _| reduce::variance(a, true)),
    ("norm", |a, _, _| reduce::norm(a)),
    ("cumsum", |a, _, _| reduce::cumsum(a)),
    ("cross_entropy", |a, _, _| loss::cross_entropy(a)),
    ("nll_loss", |a, _, _| loss::nll_loss(a)),
    ("embedding", |a, _, _| gather::embedding(a)),
    ("index_select", |a, _, _| gather::index_select(a)),
    ("gather", |a, _, _| gather::gather(a)),
    ("cat", |a, _, _| shape::cat(a)),
    ("concat", |a, _, _| shape::cat(a)),
    ("concatenate", |a, _, _| shape::cat(a)),
    ("stack", |a, _, _| shape::stack(a)),
    ("split", |a, _, _| shape::split(a, false)),
    ("chunk", |a, _, _| shape::split(a, true)),
    ("view", |a, _, _| shape::reshape(a)),
    ("reshape", |a, _, _| shape::reshape(a)),
    ("flatten", |a, _, _| shape::flatten(a)),
    ("transpose", |a, _, _| shape::transpose(a, false)),
    ("t", |a, _, _| shape::transpose(a, true)),
    ("permute", |a, _, _| shape::permute(a)),
    ("expand", |a, _, _| shape::expand(a)),
    ("squeeze", |a, _, _| shape::squeeze(a, false)),
    ("unsqueeze", |a, _, _| shape::squeeze(a, true)),
    ("contiguous", |a, _, _| shape::identity(a)),
    ("clone", |a, _, _| shape::identity(a)),
    ("detach", |a, _, _| shape::identity(a)),
    ("dropout", |a, _, _| shape::identity(a)),
];

/// The reference of `api`, `None` when there is none yet.
pub fn lookup(api: &str) -> Option<(OpFn, bool)> {
    let (name, reflected) = normalize(api);
    OPS.iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| (*f, reflected))
}

/// Replays `api` on `args`: `None` when there is no CPU reference for it yet.
pub fn replay(api: &str, args: &CallArgs, ctx: Context) -> Option<Result<Vec<Reference>>> {
    lookup(api).map(|(f, reflected)| f(args, reflected, ctx))
}
