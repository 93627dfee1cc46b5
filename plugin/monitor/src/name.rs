//! What one monitor row is about: its kind (which file family), the module or parameter it
//! names, which tensor of it (input or output, and its index), the pipeline stage (`vpp_stage`)
//! and the micro-step. msprobe's naming rules, as its 26.2 wheel writes them:
//!
//! - v1 (`TrainerMon`): tags are `<stage>:<name>[:<micro_step>]`; the CSV writer splits them at
//!   `:` into the `vpp_stage`, `name` (and `micro_step`) columns. Activations are named
//!   `<module>.input` / `<module>.output` (`<module>.input_<i>` when the module has several
//!   tensors); in `actv_grad` the same names stand for the gradients of the input and output.
//! - v2 (`TrainerMonitorV2`): `module_name` keeps the `<stage>:` prefix when the model is a list
//!   of chunks (and the `vpp_stage` column says the same; -1 when there are no chunks); module
//!   tensors are `<module>.input.<i>`, `<module>.output.<i>`, `<module>.grad_input.<i>`,
//!   `<module>.grad_output.<i>`; optimizer state is `<param>.exp_avg` / `<param>.exp_avg_sq`.
//! - Name squashing (`squash_name` in the config): a parameter or module name is cut to the part
//!   from the last `.layer.`/`.layers.`, else `.embedding.`/`.embeddings.`, else `.final`, else
//!   `.output`, else `.norm` on (`squash_param_name`); see [`squash`].

/// Which family of monitor data a row belongs to (v1's file prefixes; v2's scopes map onto them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Actv,
    ActvGrad,
    GradUnreduced,
    GradReduced,
    ExpAvg,
    ExpAvgSq,
    ParamOrigin,
    ParamUpdated,
}

impl Kind {
    /// v1's file prefix (also msprobe's `monitoring_metrics.metric_name` in a trend.db).
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Actv => "actv",
            Kind::ActvGrad => "actv_grad",
            Kind::GradUnreduced => "grad_unreduced",
            Kind::GradReduced => "grad_reduced",
            Kind::ExpAvg => "exp_avg",
            Kind::ExpAvgSq => "exp_avg_sq",
            Kind::ParamOrigin => "param_origin",
            Kind::ParamUpdated => "param_updated",
        }
    }

    pub const ALL: [Kind; 8] = [
        Kind::Actv,
        Kind::ActvGrad,
        Kind::GradUnreduced,
        Kind::GradReduced,
        Kind::ExpAvg,
        Kind::ExpAvgSq,
        Kind::ParamOrigin,
        Kind::ParamUpdated,
    ];

    pub fn from_prefix(prefix: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.prefix() == prefix)
    }

    /// Whether rows of this kind name a module's tensors (else a parameter).
    pub fn is_activation(self) -> bool {
        matches!(self, Kind::Actv | Kind::ActvGrad)
    }
}

/// Which tensor of a module a row holds: its `index`-th input or output (of the forward; in
/// `actv_grad`, the gradient with respect to it). Parameters' rows have no role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    None,
    Input(u16),
    Output(u16),
}

/// One series of a run: everything that identifies a row but its step, rank and values.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    pub kind: Kind,
    /// The pipeline stage (`vpp_stage`); v2's "no chunks" (-1) is stage 0, as v1 writes it.
    pub stage: i32,
    /// The module (activations) or parameter name, without the stage prefix.
    pub base: String,
    pub role: Role,
    pub micro_step: u32,
}

impl SeriesKey {
    /// The name as msprobe shows it: `<base>.input` etc. for activations.
    pub fn display_name(&self) -> String {
        match self.role {
            Role::None => self.base.clone(),
            Role::Input(0) => format!("{}.input", self.base),
            Role::Output(0) => format!("{}.output", self.base),
            Role::Input(i) => format!("{}.input_{i}", self.base),
            Role::Output(i) => format!("{}.output_{i}", self.base),
        }
    }
}

/// Splits a leading `<digits>:` stage prefix (`vpp:`) off `name`.
pub fn split_stage(name: &str) -> (Option<i32>, &str) {
    if let Some((head, rest)) = name.split_once(':') {
        if !head.is_empty() && head.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(stage) = head.parse() {
                return (Some(stage), rest);
            }
        }
    }
    (None, name)
}

/// The stage a row is filed under: the name's prefix when it has one, else the column's, with
/// v2's -1 ("not a chunk") as 0.
pub fn stage_of(column: i32, prefix: Option<i32>) -> i32 {
    prefix.unwrap_or(column).max(0)
}

/// A v1 activation name `<module>.input[_<i>]` / `<module>.output[_<i>]` as (module, role).
pub fn parse_v1_activation(name: &str) -> Option<(&str, Role)> {
    let (module, last) = name.rsplit_once('.')?;
    let (word, index) = match last.split_once('_') {
        Some((word, index)) => (word, index.parse().ok()?),
        None => (last, 0),
    };
    match word {
        "input" => Some((module, Role::Input(index))),
        "output" => Some((module, Role::Output(index))),
        _ => None,
    }
}

/// A v2 module tensor name `<module>.<input|output|grad_input|grad_output>.<i>` as
/// (module, role, whether it is a gradient).
pub fn parse_v2_activation(name: &str) -> Option<(&str, Role, bool)> {
    let (rest, index) = name.rsplit_once('.')?;
    let index: u16 = index.parse().ok()?;
    let (module, word) = rest.rsplit_once('.')?;
    match word {
        "input" => Some((module, Role::Input(index), false)),
        "output" => Some((module, Role::Output(index), false)),
        "grad_input" => Some((module, Role::Input(index), true)),
        "grad_output" => Some((module, Role::Output(index), true)),
        _ => None,
    }
}

/// msprobe's `squash_param_name`: the part of `name` from the last `.layer.`/`.layers.` on,
/// else from the last `.embedding.`/`.embeddings.`, else `.final…`, `.output…`, `.norm…`; the
/// name itself when none occurs. (Each pattern is `^.*\.(X)`: a greedy prefix, so the last
/// occurrence; the first pattern that matches wins.)
pub fn squash(name: &str) -> &str {
    let after_last_dot_before = |starts: &dyn Fn(&str) -> bool| -> Option<&str> {
        name.char_indices()
            .filter(|&(i, c)| c == '.' && starts(&name[i + 1..]))
            .last()
            .map(|(i, _)| &name[i + 1..])
    };
    let patterns: [&dyn Fn(&str) -> bool; 5] = [
        &|s: &str| s.starts_with("layer.") || s.starts_with("layers."),
        &|s: &str| s.starts_with("embedding.") || s.starts_with("embeddings."),
        &|s: &str| s.starts_with("final"),
        &|s: &str| s.starts_with("output"),
        &|s: &str| s.starts_with("norm"),
    ];
    patterns
        .iter()
        .find_map(|p| after_last_dot_before(*p))
        .unwrap_or(name)
}

/// The module a parameter belongs to: its name without the last component.
pub fn module_of_param(param: &str) -> &str {
    param.rsplit_once('.').map_or(param, |(m, _)| m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squash_follows_the_wheel() {
        assert_eq!(
            squash("module.language_model.encoder.layers.3.mlp.weight"),
            "layers.3.mlp.weight"
        );
        assert_eq!(
            squash("model.embedding.word_embeddings.weight"),
            "embedding.word_embeddings.weight"
        );
        assert_eq!(
            squash("model.decoder.final_layernorm.weight"),
            "final_layernorm.weight"
        );
        assert_eq!(squash("model.output_layer.weight"), "output_layer.weight");
        assert_eq!(squash("a.b.norm.weight"), "norm.weight");
        // The first matching pattern wins, and the last occurrence of it.
        assert_eq!(squash("x.layers.1.y.layers.2.norm.w"), "layers.2.norm.w");
        assert_eq!(squash("embed.weight"), "embed.weight");
        // Not idempotent: a squashed name squashes further when a later pattern matches.
        assert_eq!(squash("layers.0.norm.weight"), "norm.weight");
    }

    #[test]
    fn names_parse() {
        assert_eq!(split_stage("0:layers.0.fc1"), (Some(0), "layers.0.fc1"));
        assert_eq!(split_stage("layers.0.fc1"), (None, "layers.0.fc1"));
        assert_eq!(
            parse_v1_activation("layers.0.fc1.input_1"),
            Some(("layers.0.fc1", Role::Input(1)))
        );
        assert_eq!(
            parse_v1_activation("head.output"),
            Some(("head", Role::Output(0)))
        );
        assert_eq!(parse_v1_activation("head.weight"), None);
        assert_eq!(
            parse_v2_activation("layers.0.act.grad_output.0"),
            Some(("layers.0.act", Role::Output(0), true))
        );
        assert_eq!(module_of_param("layers.1.fc2.weight"), "layers.1.fc2");
    }
}
