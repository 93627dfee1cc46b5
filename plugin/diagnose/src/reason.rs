//! Why a node is a source, or where the first inf/NaN is, as data: a list of [`ReasonPart`]s,
//! each a kind with its values (which weight or argument, which entry, which metric, the
//! numbers). The English sentence ("inputs agree to 1.0e-6; output.0 Norm differs by 3.1%") is
//! rendered here, once, by `Display`, for the CLI, the CSV and other gRPC clients; the page
//! renders the same parts in its own language (`frontend/src/i18n.ts`, keys `diag.reason.*`),
//! so a translation never parses English.

use std::fmt;

use crate::judge::Metric;

/// One clause of a reason. Serialized with its kind in `kind` (snake_case) and its values
/// beside it, as the CLI's JSON and the service's answer carry it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReasonPart {
    /// A weight (a module's parameter or an API's weight argument) differs by `err` in `metric`.
    ParameterDiffers {
        name: Box<str>,
        metric: Metric,
        err: f64,
    },
    /// A weight holds inf/NaN on one side: its `metric` statistic is `value` (`inf`, `-inf`,
    /// `NaN`), on the golden side when `golden`. A cause, not a difference of some size.
    ParameterNonFinite {
        name: Box<str>,
        metric: Metric,
        value: Box<str>,
        golden: bool,
    },
    /// A weight's md5 differs (md5 mode: no magnitude); `entry` is the key compared.
    ParameterMd5Differs { name: Box<str>, entry: Box<str> },
    /// A non-tensor argument (`eps`, a dropout `p`) has another value than golden's.
    ArgumentDiffers {
        name: Box<str>,
        target: Box<str>,
        golden: Box<str>,
    },
    /// The activation inputs are bit for bit golden's.
    InputsEqual,
    /// The activation inputs have golden's md5.
    InputsEqualMd5,
    /// The inputs agree within the noise; the worst is `err` off.
    InputsAgree { err: f64 },
    /// The inputs differ by `err` (an amplifying node: they differ, its outputs far more).
    InputsDiffer {
        entry: Box<str>,
        metric: Metric,
        err: f64,
    },
    /// The inputs' md5 differ.
    InputsDifferMd5,
    /// The inputs already differ beyond the noise (a cause that is not the first difference).
    InputsAlreadyDiffer {
        entry: Box<str>,
        metric: Metric,
        err: f64,
    },
    /// Output `entry` differs from golden's by `err` in `metric`.
    OutputDiffers {
        entry: Box<str>,
        metric: Metric,
        err: f64,
    },
    /// Output `entry`'s md5 differs.
    OutputMd5Differs { entry: Box<str> },
    /// Output `entry` holds inf/NaN where golden's does not.
    OutputNonFinite { entry: Box<str> },
    /// The outputs are `score` times worse than the inputs.
    WorseThanInputs { score: f64 },
    /// Every input of the node is finite.
    InputsFinite,
    /// Output `entry` (or, unnamed, some output) holds inf/NaN.
    HoldsNonFinite { entry: Option<Box<str>> },
    /// A forward module's output `entry` is, in the golden run, the output of its last dumped
    /// call `name`; in the target it is `err` off golden (in `metric`) where the call's is only
    /// `call_err`: the module changed it after the call, in computation the dump did not see
    /// ([`crate::unseen`]). `call_err` is given as `score` by [`ReasonPart::values`].
    OutputChangedAfterCall {
        name: Box<str>,
        entry: Box<str>,
        metric: Metric,
        err: f64,
        call_err: f64,
    },
    /// The same for a backward module: its input gradient `entry` after the last dumped call
    /// `name` that produced it.
    GradientChangedAfterCall {
        name: Box<str>,
        entry: Box<str>,
        metric: Metric,
        err: f64,
        call_err: f64,
    },
    /// A node's output `entry` agrees with golden in its record (`call_err`) but not where
    /// `name`, the next dumped call to read it, reads it (`err`): it changed after the record,
    /// in computation the dump did not see (a user's forward hook runs after msprobe's).
    OutputChangedBeforeCall {
        name: Box<str>,
        entry: Box<str>,
        metric: Metric,
        err: f64,
        call_err: f64,
    },
    /// The same for a backward node's input gradient.
    GradientChangedBeforeCall {
        name: Box<str>,
        entry: Box<str>,
        metric: Metric,
        err: f64,
        call_err: f64,
    },
    /// A backward module whose only API call `name` records no input gradient of the call
    /// (msprobe reads an API's backward at a reshape after its kernel): the module's input
    /// gradient is that kernel's.
    KernelBackward { name: Box<str> },
}

/// A relative error as the reasons write it: `3.1%` from 1 %, else `1.0e-6`; `0`, `inf`.
/// (`frontend/src/diagnosis.ts` `errText` writes it the same way.)
pub fn err_text(err: f64) -> String {
    if err == 0.0 {
        "0".into()
    } else if !err.is_finite() {
        "inf".into()
    } else if err >= 1e-2 {
        format!("{:.1}%", err * 100.0)
    } else {
        format!("{err:.1e}")
    }
}

impl fmt::Display for ReasonPart {
    /// The clause in English.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ReasonPart::*;
        match self {
            ParameterDiffers { name, metric, err } => write!(
                f,
                "parameter {name} differs ({} by {})",
                metric.label(),
                err_text(*err)
            ),
            ParameterNonFinite {
                name,
                metric,
                value,
                golden,
            } => {
                let side = if *golden { "golden's " } else { "" };
                if value.eq_ignore_ascii_case("nan") {
                    write!(f, "{side}{name}'s {} is NaN", metric.label())
                } else {
                    write!(f, "{side}{name}'s {} overflows to {value}", metric.label())
                }
            }
            ParameterMd5Differs { name, entry } => {
                write!(f, "parameter {name} differs (md5 of {entry})")
            }
            ArgumentDiffers {
                name,
                target,
                golden,
            } => write!(f, "argument {name} differs: {target} vs golden {golden}"),
            InputsEqual => f.write_str("inputs are equal"),
            InputsEqualMd5 => f.write_str("inputs are equal (md5)"),
            InputsAgree { err } => write!(f, "inputs agree to {}", err_text(*err)),
            InputsDiffer { entry, metric, err } => write!(
                f,
                "inputs differ by {} ({} of {entry})",
                err_text(*err),
                metric.label()
            ),
            InputsDifferMd5 => f.write_str("inputs differ (md5)"),
            InputsAlreadyDiffer { entry, metric, err } => write!(
                f,
                "inputs already differ by {} ({} of {entry})",
                err_text(*err),
                metric.label()
            ),
            OutputDiffers { entry, metric, err } => write!(
                f,
                "{entry} {} differs by {}",
                metric.label(),
                err_text(*err)
            ),
            OutputMd5Differs { entry } => write!(f, "{entry} md5 differs"),
            OutputNonFinite { entry } => write!(f, "{entry} has inf/NaN where golden has none"),
            WorseThanInputs { score } => write!(f, "{score:.0}x worse than its inputs"),
            InputsFinite => f.write_str("inputs are finite"),
            HoldsNonFinite { entry: Some(entry) } => write!(f, "{entry} holds inf/NaN"),
            HoldsNonFinite { entry: None } => f.write_str("an output holds inf/NaN"),
            OutputChangedAfterCall {
                name,
                entry,
                metric,
                err,
                call_err,
            } => write!(
                f,
                "changes its output {entry} after its last dumped call {name}: {} against {} ({})",
                err_text(*err),
                err_text(*call_err),
                metric.label()
            ),
            GradientChangedAfterCall {
                name,
                entry,
                metric,
                err,
                call_err,
            } => write!(
                f,
                "changes its input gradient {entry} after its last dumped call {name}: {} against {} ({})",
                err_text(*err),
                err_text(*call_err),
                metric.label()
            ),
            OutputChangedBeforeCall {
                name,
                entry,
                metric,
                err,
                call_err,
            } => write!(
                f,
                "its output {entry} changes after its record, before {name} reads it: {} against {} ({})",
                err_text(*err),
                err_text(*call_err),
                metric.label()
            ),
            GradientChangedBeforeCall {
                name,
                entry,
                metric,
                err,
                call_err,
            } => write!(
                f,
                "its input gradient {entry} changes after its record, before {name} reads it: {} against {} ({})",
                err_text(*err),
                err_text(*call_err),
                metric.label()
            ),
            KernelBackward { name } => write!(
                f,
                "its input gradient is the kernel's of {name}, whose record holds no input gradient of the call"
            ),
        }
    }
}

/// The values of a part, flat (absent ones `None`), for messages with one field per value.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PartValues<'a> {
    pub name: Option<&'a str>,
    pub entry: Option<&'a str>,
    pub metric: Option<Metric>,
    pub err: Option<f64>,
    pub target: Option<&'a str>,
    pub golden: Option<&'a str>,
    pub score: Option<f64>,
}

impl ReasonPart {
    /// The kind's name, as serialized (`inputs_agree`).
    pub fn kind(&self) -> &'static str {
        use ReasonPart::*;
        match self {
            ParameterDiffers { .. } => "parameter_differs",
            ParameterNonFinite { .. } => "parameter_non_finite",
            ParameterMd5Differs { .. } => "parameter_md5_differs",
            ArgumentDiffers { .. } => "argument_differs",
            InputsEqual => "inputs_equal",
            InputsEqualMd5 => "inputs_equal_md5",
            InputsAgree { .. } => "inputs_agree",
            InputsDiffer { .. } => "inputs_differ",
            InputsDifferMd5 => "inputs_differ_md5",
            InputsAlreadyDiffer { .. } => "inputs_already_differ",
            OutputDiffers { .. } => "output_differs",
            OutputMd5Differs { .. } => "output_md5_differs",
            OutputNonFinite { .. } => "output_non_finite",
            WorseThanInputs { .. } => "worse_than_inputs",
            InputsFinite => "inputs_finite",
            HoldsNonFinite { .. } => "holds_non_finite",
            OutputChangedAfterCall { .. } => "output_changed_after_call",
            GradientChangedAfterCall { .. } => "gradient_changed_after_call",
            OutputChangedBeforeCall { .. } => "output_changed_before_call",
            GradientChangedBeforeCall { .. } => "gradient_changed_before_call",
            KernelBackward { .. } => "kernel_backward",
        }
    }

    /// Its values, flat.
    pub fn values(&self) -> PartValues<'_> {
        use ReasonPart::*;
        let none = PartValues::default();
        match self {
            ParameterDiffers { name, metric, err } => PartValues {
                name: Some(name),
                metric: Some(*metric),
                err: Some(*err),
                ..none
            },
            ParameterNonFinite {
                name,
                metric,
                value,
                golden,
            } => PartValues {
                name: Some(name),
                metric: Some(*metric),
                target: (!golden).then_some(&**value),
                golden: golden.then_some(&**value),
                ..none
            },
            ParameterMd5Differs { name, entry } => PartValues {
                name: Some(name),
                entry: Some(entry),
                ..none
            },
            ArgumentDiffers {
                name,
                target,
                golden,
            } => PartValues {
                name: Some(name),
                target: Some(target),
                golden: Some(golden),
                ..none
            },
            InputsEqual | InputsEqualMd5 | InputsDifferMd5 | InputsFinite => none,
            InputsAgree { err } => PartValues {
                err: Some(*err),
                ..none
            },
            InputsDiffer { entry, metric, err }
            | InputsAlreadyDiffer { entry, metric, err }
            | OutputDiffers { entry, metric, err } => PartValues {
                entry: Some(entry),
                metric: Some(*metric),
                err: Some(*err),
                ..none
            },
            OutputMd5Differs { entry } | OutputNonFinite { entry } => PartValues {
                entry: Some(entry),
                ..none
            },
            WorseThanInputs { score } => PartValues {
                score: Some(*score),
                ..none
            },
            HoldsNonFinite { entry } => PartValues {
                entry: entry.as_deref(),
                ..none
            },
            OutputChangedAfterCall {
                name,
                entry,
                metric,
                err,
                call_err,
            }
            | GradientChangedAfterCall {
                name,
                entry,
                metric,
                err,
                call_err,
            }
            | OutputChangedBeforeCall {
                name,
                entry,
                metric,
                err,
                call_err,
            }
            | GradientChangedBeforeCall {
                name,
                entry,
                metric,
                err,
                call_err,
            } => PartValues {
                name: Some(name),
                entry: Some(entry),
                metric: Some(*metric),
                err: Some(*err),
                score: Some(*call_err),
                ..none
            },
            KernelBackward { name } => PartValues {
                name: Some(name),
                ..none
            },
        }
    }
}

/// The parts as one English sentence, joined by `; `.
pub fn sentence(parts: &[ReasonPart]) -> String {
    let mut out = String::new();
    for (k, p) in parts.iter().enumerate() {
        if k > 0 {
            out.push_str("; ");
        }
        out.push_str(&p.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_written_as_percentages_or_exponents() {
        assert_eq!(err_text(0.0), "0");
        assert_eq!(err_text(f64::INFINITY), "inf");
        assert_eq!(err_text(0.031), "3.1%");
        assert_eq!(err_text(1e-6), "1.0e-6");
        assert_eq!(err_text(0.0042), "4.2e-3");
    }

    #[test]
    fn a_reason_reads_as_one_english_sentence() {
        let parts = [
            ReasonPart::InputsAgree { err: 1e-6 },
            ReasonPart::OutputDiffers {
                entry: "output.0".into(),
                metric: Metric::Norm,
                err: 0.031,
            },
        ];
        assert_eq!(
            sentence(&parts),
            "inputs agree to 1.0e-6; output.0 Norm differs by 3.1%"
        );
        let arg = ReasonPart::ArgumentDiffers {
            name: "eps".into(),
            target: "0.1".into(),
            golden: "1e-05".into(),
        };
        assert_eq!(arg.to_string(), "argument eps differs: 0.1 vs golden 1e-05");
        assert_eq!(
            ReasonPart::HoldsNonFinite { entry: None }.to_string(),
            "an output holds inf/NaN"
        );
        let overflow = ReasonPart::ParameterNonFinite {
            name: "weight".into(),
            metric: Metric::Norm,
            value: "inf".into(),
            golden: false,
        };
        assert_eq!(overflow.to_string(), "weight's Norm overflows to inf");
        assert_eq!(
            serde_json::to_value(&overflow).unwrap()["kind"],
            overflow.kind()
        );
    }

    #[test]
    fn parts_serialize_with_their_kind_and_values() {
        let part = ReasonPart::ParameterDiffers {
            name: "weight".into(),
            metric: Metric::Max,
            err: 0.5,
        };
        let json = serde_json::to_value(&part).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "parameter_differs", "name": "weight", "metric": "Max", "err": 0.5})
        );
        assert_eq!(json["kind"], part.kind());
        let v = part.values();
        assert_eq!(
            (v.name, v.metric, v.err, v.entry),
            (Some("weight"), Some(Metric::Max), Some(0.5), None)
        );
        // Every kind's name is its serialized tag.
        for p in [
            ReasonPart::InputsEqual,
            ReasonPart::InputsEqualMd5,
            ReasonPart::InputsDifferMd5,
            ReasonPart::InputsFinite,
            ReasonPart::WorseThanInputs { score: 40.0 },
            ReasonPart::HoldsNonFinite { entry: None },
            ReasonPart::OutputMd5Differs {
                entry: "output.0".into(),
            },
        ] {
            assert_eq!(serde_json::to_value(&p).unwrap()["kind"], p.kind());
        }
    }
}
