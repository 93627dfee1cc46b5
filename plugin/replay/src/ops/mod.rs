//! The op families, one file each, and the table from an API name to its reference.
//!
//! Every op computes its exact result in f64 from the (loaded, possibly autocast) inputs and
//! says what a correct kernel's error may be ([`crate::reference::Budget`]).

pub mod activation;
pub mod common;
pub mod elementwise;
pub mod gather;
pub mod matmul;
pub mod norm;
pub mod reduce;
pub mod shape;
pub mod softmax;

use crate::args::CallArgs;
use crate::error::Result;
use crate::reference::Reference;

use elementwise::{Arith, Unary};

/// What the replay knows of the call beyond its arguments.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context {
    /// The output dtype is below fp32 (bf16/fp16 kernels that round intermediates).
    pub below_fp32: bool,
}

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

/// The op names this crate replays (after [`normalize`]), for docs and `--help`.
pub const SUPPORTED: &[&str] = &[
    "linear",
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "softmax",
    "log_softmax",
    "layer_norm",
    "rms_norm",
    "npu_rms_norm",
    "gelu",
    "npu_fast_gelu",
    "silu",
    "npu_swiglu",
    "relu",
    "sigmoid",
    "tanh",
    "add",
    "sub",
    "mul",
    "div",
    "truediv",
    "pow",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "neg",
    "abs",
    "where",
    "masked_fill",
    "sum",
    "mean",
    "max",
    "min",
    "amax",
    "amin",
    "var",
    "std",
    "norm",
    "embedding",
    "index_select",
    "gather",
    "cat",
    "concat",
    "stack",
    "split",
    "chunk",
    "view",
    "reshape",
    "flatten",
    "transpose",
    "t",
    "permute",
    "expand",
    "squeeze",
    "unsqueeze",
    "contiguous",
    "clone",
    "detach",
    "dropout",
];

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

/// Replays `api` on `args`: `None` when there is no CPU reference for it yet.
pub fn replay(api: &str, args: &CallArgs, ctx: Context) -> Option<Result<Vec<Reference>>> {
    let (name, reflected) = normalize(api);
    let r = match name.as_str() {
        "linear" => matmul::linear(args),
        "matmul" | "mm" | "bmm" => matmul::matmul(args, reflected),
        "addmm" | "baddbmm" => matmul::addmm(args),
        "softmax" => softmax::softmax(args),
        "log_softmax" => softmax::log_softmax(args),
        "layer_norm" => norm::layer_norm(args),
        "rms_norm" => norm::rms_norm(args),
        "npu_rms_norm" => norm::npu_rms_norm(args),
        "gelu" => activation::gelu(args),
        "npu_fast_gelu" | "fast_gelu" => activation::fast_gelu(args),
        "silu" => activation::silu_op(args),
        "npu_swiglu" => activation::swiglu(args, ctx.below_fp32),
        "relu" => activation::relu(args),
        "sigmoid" => activation::sigmoid_op(args),
        "tanh" => activation::tanh_op(args),
        "add" => elementwise::arith(args, Arith::Add, reflected),
        "sub" | "subtract" => elementwise::arith(args, Arith::Sub, reflected),
        "mul" | "multiply" => elementwise::arith(args, Arith::Mul, reflected),
        "div" | "truediv" | "true_divide" | "divide" => {
            elementwise::arith(args, Arith::Div, reflected)
        }
        "pow" => elementwise::arith(args, Arith::Pow, reflected),
        "exp" => elementwise::unary(args, Unary::Exp),
        "log" => elementwise::unary(args, Unary::Log),
        "sqrt" => elementwise::unary(args, Unary::Sqrt),
        "rsqrt" => elementwise::unary(args, Unary::Rsqrt),
        "neg" | "negative" => elementwise::unary(args, Unary::Neg),
        "abs" => elementwise::unary(args, Unary::Abs),
        "where" => elementwise::where_op(args),
        "masked_fill" => elementwise::masked_fill(args),
        "sum" => reduce::sum(args, reduce::Sum::Sum),
        "mean" => reduce::sum(args, reduce::Sum::Mean),
        "max" | "amax" => reduce::extremum(args, true),
        "min" | "amin" => reduce::extremum(args, false),
        "var" => reduce::variance(args, false),
        "std" => reduce::variance(args, true),
        "norm" => reduce::norm(args),
        "embedding" => gather::embedding(args),
        "index_select" => gather::index_select(args),
        "gather" => gather::gather(args),
        "cat" | "concat" | "concatenate" => shape::cat(args),
        "stack" => shape::stack(args),
        "split" => shape::split(args, false),
        "chunk" => shape::split(args, true),
        "view" | "reshape" => shape::reshape(args),
        "flatten" => shape::flatten(args),
        "transpose" => shape::transpose(args, false),
        "t" => shape::transpose(args, true),
        "permute" => shape::permute(args),
        "expand" => shape::expand(args),
        "squeeze" => shape::squeeze(args, false),
        "unsqueeze" => shape::squeeze(args, true),
        "contiguous" | "clone" | "detach" | "dropout" => shape::identity(args),
        _ => return None,
    };
    Some(r)
}
