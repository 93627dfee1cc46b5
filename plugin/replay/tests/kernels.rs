//! Noise-only must not fail, faults must: bf16 kernels computed differently from the
//! reference (sequential, split-K, pairwise; an approximate exp; a one-pass variance; two
//! roundings) stay within their budget, and a few-ULP fault (one tile of a matmul, a truncating
//! rounding, a constant offset) does not.

use graph_ascend_replay::args::{CallArgs, TensorValue, Value};
use graph_ascend_replay::ops::{self, Context};
use graph_ascend_replay::reference::Reference;
use graph_ascend_replay::verdict::{judge, Ours};
use graph_ascend_replay::Dtype;
use ndarray::{ArrayD, IxDyn};

/// A small deterministic generator (xorshift64*), normal by Box–Muller.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545F4914F6CDD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
    /// bf16 values, normal with standard deviation `s`.
    fn bf16(&mut self, shape: &[usize], s: f64) -> ArrayD<f64> {
        let n = shape.iter().product();
        let v = (0..n)
            .map(|_| Dtype::Bf16.round(self.normal() * s))
            .collect();
        ArrayD::from_shape_vec(IxDyn(shape), v).unwrap()
    }
}

fn tensor(a: &ArrayD<f64>) -> Value {
    Value::Tensor(TensorValue {
        dtype_name: "torch.bfloat16".into(),
        dtype: Some(Dtype::Bf16),
        shape: a.shape().to_vec(),
        data_name: None,
        data: Some(a.clone()),
    })
}

fn reference(api: &str, args: Vec<Value>, kwargs: Vec<(&str, Value)>) -> Reference {
    let args = CallArgs {
        args,
        kwargs: kwargs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    };
    let ctx = Context { below_fp32: true };
    ops::replay(api, &args, ctx).unwrap().unwrap().remove(0)
}

fn verdict(r: &Reference, device: &[f64]) -> Ours {
    judge(r, device, Dtype::Bf16, Dtype::F32)
}

fn f32_round(x: f64) -> f64 {
    x as f32 as f64
}

/// `a @ b` as a bf16 kernel: fp32 products and sums in the order `order` gives, then one
/// rounding to bf16.
fn matmul_kernel(a: &ArrayD<f64>, b: &ArrayD<f64>, order: &str) -> Vec<f64> {
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[1]);
    let mut out = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let terms: Vec<f64> = (0..k).map(|p| f32_round(a[[i, p]] * b[[p, j]])).collect();
            let s = match order {
                "sequential" => terms.iter().fold(0.0, |s, t| f32_round(s + t)),
                "reversed" => terms.iter().rev().fold(0.0, |s, t| f32_round(s + t)),
                "split-k" => terms
                    .chunks(k / 8)
                    .map(|c| c.iter().fold(0.0, |s, t| f32_round(s + t)))
                    .fold(0.0, |s, t| f32_round(s + t)),
                _ => pairwise(&terms),
            };
            out.push(Dtype::Bf16.round(s));
        }
    }
    out
}

fn pairwise(t: &[f64]) -> f64 {
    if t.len() <= 2 {
        return t.iter().fold(0.0, |s, x| f32_round(s + x));
    }
    let (l, r) = t.split_at(t.len() / 2);
    f32_round(pairwise(l) + pairwise(r))
}

#[test]
fn matmul_computed_in_any_order_passes_and_a_tile_fault_fails() {
    let mut rng = Rng(38);
    let a = rng.bf16(&[16, 512], 1.0);
    let b = rng.bf16(&[512, 24], 0.05);
    let r = reference("matmul", vec![tensor(&a), tensor(&b)], vec![]);
    for order in ["sequential", "reversed", "split-k", "pairwise"] {
        let v = verdict(&r, &matmul_kernel(&a, &b, order));
        assert!(v.pass, "{order}: {}", v.why);
        assert!(v.max_ulp <= 1.01, "{order}: {}", v.max_ulp);
    }
    // One 4x4 tile off by 3 ULPs (a wrong partial sum in one block).
    let mut faulty = matmul_kernel(&a, &b, "split-k");
    for i in 4..8 {
        for j in 8..12 {
            let x = faulty[i * 24 + j];
            faulty[i * 24 + j] = x + 3.0 * Dtype::Bf16.ulp(x);
        }
    }
    let v = verdict(&r, &faulty);
    assert!(!v.pass, "{}", v.why);
    assert!(v.over_budget >= 12, "{}", v.why);
}

#[test]
fn softmax_with_an_approximate_exp_passes_and_a_constant_offset_fails() {
    let mut rng = Rng(7);
    let x = rng.bf16(&[32, 64], 3.0);
    let r = reference("softmax", vec![tensor(&x)], vec![("dim", Value::Int(-1))]);
    // fp32 kernel: exp with a 2-ULP error of fp32, sum in reverse order, then one rounding.
    let mut device = Vec::new();
    for row in x.rows() {
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row
            .iter()
            .map(|&v| f32_round(f32_round((v - m).exp()) * (1.0 + 2.0 * (-23f64).exp2())))
            .collect();
        let s = e.iter().rev().fold(0.0, |s, t| f32_round(s + t));
        device.extend(e.iter().map(|v| Dtype::Bf16.round(f32_round(v / s))));
    }
    let v = verdict(&r, &device);
    assert!(v.pass, "{}", v.why);
    // Every element one ULP up: within the per-element budget, but biased.
    let shifted: Vec<f64> = device.iter().map(|&d| d + Dtype::Bf16.ulp(d)).collect();
    let v = verdict(&r, &shifted);
    assert!(!v.pass, "{}", v.why);
}

#[test]
fn layer_norm_with_a_one_pass_variance_passes_and_truncation_fails() {
    let mut rng = Rng(11);
    let x = rng
        .bf16(&[64, 256], 2.0)
        .mapv(|v| Dtype::Bf16.round(v + 3.0));
    let w = rng.bf16(&[256], 1.0);
    let b = rng.bf16(&[256], 0.1);
    let r = reference(
        "layer_norm",
        vec![
            tensor(&x),
            Value::List(vec![Value::Int(256)]),
            tensor(&w),
            tensor(&b),
            Value::Float(1e-5),
        ],
        vec![],
    );
    let kernel = |truncate: bool| -> Vec<f64> {
        let mut out = Vec::new();
        for row in x.rows() {
            let n = row.len() as f64;
            let (s, sq) = row.iter().fold((0.0, 0.0), |(s, q), &v| {
                (f32_round(s + v), f32_round(q + v * v))
            });
            let mean = f32_round(s / n);
            let var = f32_round(f32_round(sq / n) - f32_round(mean * mean));
            let rstd = f32_round(1.0 / f32_round(var + 1e-5).sqrt());
            for (j, &v) in row.iter().enumerate() {
                let y = f32_round(f32_round(f32_round(v - mean) * rstd) * w[j] + b[j]);
                out.push(if truncate {
                    half::bf16::from_bits((y as f32).to_bits().wrapping_shr(16) as u16).to_f64()
                } else {
                    Dtype::Bf16.round(y)
                });
            }
        }
        out
    };
    let v = verdict(&r, &kernel(false));
    assert!(v.pass, "{}", v.why);
    let v = verdict(&r, &kernel(true));
    assert!(!v.pass, "truncation: {}", v.why);
}

#[test]
fn swiglu_with_two_roundings_passes() {
    let mut rng = Rng(5);
    let x = rng.bf16(&[8, 128], 2.0);
    let r = reference(
        "npu_swiglu",
        vec![tensor(&x)],
        vec![("dim", Value::Int(-1))],
    );
    // msprobe's bench for bf16: silu in fp32 rounded to bf16, times b in fp32, rounded again.
    let mut device = Vec::new();
    for row in x.rows() {
        let (a, b) = row.as_slice().unwrap().split_at(64);
        for (&a, &b) in a.iter().zip(b) {
            let silu = Dtype::Bf16.round(f32_round(a / (1.0 + (-a).exp())));
            device.push(Dtype::Bf16.round(f32_round(silu * b)));
        }
    }
    let v = verdict(&r, &device);
    assert!(v.pass, "{}", v.why);
}

#[test]
fn add_rounded_once_passes_and_rounded_toward_zero_fails() {
    let mut rng = Rng(3);
    let a = rng.bf16(&[4096], 1.0);
    let b = rng.bf16(&[4096], 1.0);
    let r = reference("__add__", vec![tensor(&a), tensor(&b)], vec![]);
    let sums: Vec<f64> = a
        .iter()
        .zip(b.iter())
        .map(|(x, y)| f32_round(x + y))
        .collect();
    let good: Vec<f64> = sums.iter().map(|&s| Dtype::Bf16.round(s)).collect();
    assert!(verdict(&r, &good).pass);
    let toward_zero: Vec<f64> = sums
        .iter()
        .map(|&s| half::bf16::from_bits((s as f32).to_bits().wrapping_shr(16) as u16).to_f64())
        .collect();
    let v = verdict(&r, &toward_zero);
    assert!(!v.pass, "{}", v.why);
    assert!(v.magnitude_bias_ulp < -0.25, "{v:?}");
}
