//! Noise-only must not fail, faults must: bf16 kernels computed differently from the
//! reference (sequential, split-K, pairwise; an approximate exp; a one-pass variance; two
//! roundings; a conv summed in another order; flash attention with `P` in bf16) stay within
//! their budget, and a few-ULP fault (one tile of a matmul, a truncating rounding, a constant
//! offset, one conv channel, one attention head, a block not rescaled) does not.

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
    let ctx = Context {
        below_fp32: true,
        ..Context::default()
    };
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

/// A bf16 flash-attention kernel on `[heads, S, D]` (one batch, BNSD): fp32 scores, an online
/// softmax over key blocks of `block`, `P` rounded to bf16 before `P·V`, fp32 accumulation,
/// one division by the row sum, the output rounded to bf16. `fault` changes one step.
fn flash_kernel(
    q: &ArrayD<f64>,
    k: &ArrayD<f64>,
    v: &ArrayD<f64>,
    scale: f64,
    block: usize,
    fault: &str,
) -> Vec<f64> {
    let (h, s1, d) = (q.shape()[1], q.shape()[2], q.shape()[3]);
    let s2 = k.shape()[2];
    let mut out = Vec::new();
    for n in 0..h {
        for i in 0..s1 {
            let (mut m, mut l) = (f64::NEG_INFINITY, 0.0);
            let mut acc = vec![0.0; d];
            for (bi, start) in (0..s2).step_by(block).enumerate() {
                let keys = start..(start + block).min(s2);
                let s: Vec<f64> = keys
                    .clone()
                    .map(|j| {
                        let dot = (0..d).fold(0.0, |a, t| {
                            f32_round(a + f32_round(q[[0, n, i, t]] * k[[0, n, j, t]]))
                        });
                        f32_round(dot * scale)
                    })
                    .collect();
                let m_new = s.iter().copied().fold(m, f64::max);
                let corr = f32_round((m - m_new).exp());
                let p: Vec<f64> = s.iter().map(|&x| f32_round((x - m_new).exp())).collect();
                l = f32_round(l * corr + p.iter().fold(0.0, |a, &x| f32_round(a + x)));
                let rescale = !(fault == "a block not rescaled" && bi == 1 && n == 0);
                for (c, a) in acc.iter_mut().enumerate() {
                    let pv = keys.clone().zip(&p).fold(0.0, |s, (j, &pj)| {
                        f32_round(s + f32_round(Dtype::Bf16.round(pj) * v[[0, n, j, c]]))
                    });
                    *a = f32_round(if rescale { *a * corr } else { *a } + pv);
                }
                m = m_new;
            }
            for a in acc {
                let y = Dtype::Bf16.round(f32_round(a / l));
                out.push(if fault == "head 1 off by 4 ULP" && n == 1 {
                    y + 4.0 * Dtype::Bf16.ulp(y)
                } else {
                    y
                });
            }
        }
    }
    out
}

#[test]
fn flash_attention_with_p_in_bf16_passes_and_its_faults_fail() {
    let mut rng = Rng(44);
    let (h, s, d) = (2, 96, 32);
    let q = rng.bf16(&[1, h, s, d], 1.0);
    let k = rng.bf16(&[1, h, s, d], 1.0);
    let v = rng.bf16(&[1, h, s, d], 1.0);
    let args = CallArgs {
        args: vec![
            tensor(&q),
            tensor(&k),
            tensor(&v),
            Value::Int(h as i64),
            Value::Str("BNSD".into()),
        ],
        kwargs: vec![("scale".into(), Value::Float(0.5))],
    };
    let ctx = Context {
        below_fp32: true,
        ran_in: Some(Dtype::Bf16),
    };
    let r = ops::replay("npu_fusion_attention", &args, ctx)
        .unwrap()
        .unwrap()
        .remove(0);
    for block in [16, 32, 96] {
        let v = verdict(&r, &flash_kernel(&q, &k, &v, 0.5, block, ""));
        assert!(v.pass, "block {block}: {}", v.why);
    }
    for fault in ["a block not rescaled", "head 1 off by 4 ULP"] {
        let v = verdict(&r, &flash_kernel(&q, &k, &v, 0.5, 32, fault));
        assert!(!v.pass, "{fault}: {}", v.why);
    }
}

/// A bf16 conv2d kernel (stride 1, padding 1): fp32 products summed in fp32, channels first
/// or the window first, one rounding to bf16; `shift` ULPs added to output channel 5.
fn conv_kernel(x: &ArrayD<f64>, w: &ArrayD<f64>, channels_first: bool, shift: f64) -> Vec<f64> {
    let (n, c, h, wd) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
    let (o, k) = (w.shape()[0], w.shape()[2]);
    let mut out = Vec::new();
    for b in 0..n {
        for oc in 0..o {
            for i in 0..h {
                for j in 0..wd {
                    let mut terms = Vec::new();
                    for ci in 0..c {
                        for u in 0..k {
                            for t in 0..k {
                                let (ih, iw) = (i as i64 + u as i64 - 1, j as i64 + t as i64 - 1);
                                if ih < 0 || iw < 0 || ih >= h as i64 || iw >= wd as i64 {
                                    continue;
                                }
                                let p = x[[b, ci, ih as usize, iw as usize]] * w[[oc, ci, u, t]];
                                terms.push((ci, f32_round(p)));
                            }
                        }
                    }
                    if !channels_first {
                        terms.sort_by_key(|&(ci, _)| std::cmp::Reverse(ci));
                    }
                    let s = terms.iter().fold(0.0, |s, &(_, p)| f32_round(s + p));
                    let y = Dtype::Bf16.round(s);
                    out.push(if oc == 5 {
                        y + shift * Dtype::Bf16.ulp(y)
                    } else {
                        y
                    });
                }
            }
        }
    }
    out
}

#[test]
fn conv2d_summed_in_any_order_passes_and_a_channel_fault_fails() {
    let mut rng = Rng(21);
    let x = rng.bf16(&[2, 8, 10, 10], 1.0);
    let w = rng.bf16(&[16, 8, 3, 3], 0.2);
    let r = reference(
        "conv2d",
        vec![tensor(&x), tensor(&w)],
        vec![("padding", Value::Int(1))],
    );
    for channels_first in [true, false] {
        let v = verdict(&r, &conv_kernel(&x, &w, channels_first, 0.0));
        assert!(v.pass, "{}", v.why);
    }
    let v = verdict(&r, &conv_kernel(&x, &w, true, 3.0));
    assert!(!v.pass, "{}", v.why);
}
