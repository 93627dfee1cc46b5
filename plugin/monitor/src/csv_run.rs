//! Reading one rank folder of v1 or v2 CSVs into a [`RankTable`], file by file, line by line.
//!
//! - v1 files are `<prefix>_<start>-<end>.csv` (msprobe's `get_metric_name_from_filename`: the
//!   prefix one of [`Kind`]'s); columns `vpp_stage,name,step[,micro_step]` and the ops.
//! - v2 files are `<monitor>_step<a>-<b>.csv` for the `module`, `weight_grad`, `optimizer` and
//!   `param` monitors (`cc` has no module or parameter to pair); columns
//!   `vpp_stage,step,module_name,scope[,micro_step]` and the ops. The scope says the kind:
//!   `forward`/`backward` (module), `unreduced`/`reduced`, `exp_avg`/`exp_avg_sq`,
//!   `param_origin`/`param_updated`.
//!
//! Files are read in kind order, each kind's files by start step, so that each series is first
//! met in the order msprobe wrote it (execution order). A torn last line (no newline yet) ends
//! a file; a complete line that does not parse is an error naming the file and line.
use std::path::{Path, PathBuf};

use crate::csv_line::{parse_value, CsvLines};
use crate::error::MonitorError;
use crate::name::{self, Kind, Role, SeriesKey};
use crate::rank_table::RankTable;
use crate::run::Format;

/// What a file of a rank folder holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum FileKind {
    V1(Kind),
    V2(V2Monitor),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum V2Monitor {
    Module,
    WeightGrad,
    Optimizer,
    Param,
}

/// `<stem>_<a>-<b>.csv` → (stem, a) when a and b are numbers.
fn split_range<'a>(file: &'a str, sep: &str) -> Option<(&'a str, i64)> {
    let stem = file.strip_suffix(".csv")?;
    let (head, range) = stem.rsplit_once(sep)?;
    let (a, b) = range.split_once('-')?;
    if a.is_empty() || b.is_empty() || !(a.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit())) {
        return None;
    }
    Some((head, a.parse().ok()?))
}

fn file_kind(format: Format, file: &str) -> Option<(FileKind, i64)> {
    match format {
        Format::V1 => {
            let (prefix, start) = split_range(file, "_")?;
            Some((FileKind::V1(Kind::from_prefix(prefix)?), start))
        }
        Format::V2 => {
            let (monitor, start) = split_range(file, "_step")?;
            let monitor = match monitor {
                "module" => V2Monitor::Module,
                "weight_grad" => V2Monitor::WeightGrad,
                "optimizer" => V2Monitor::Optimizer,
                "param" => V2Monitor::Param,
                _ => return None,
            };
            Some((FileKind::V2(monitor), start))
        }
        Format::TrendDb => None,
    }
}

/// The monitor files of a rank folder in reading order.
fn files(format: Format, dir: &Path) -> Result<Vec<(FileKind, PathBuf)>, MonitorError> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| MonitorError::io(dir, e))? {
        let entry = entry.map_err(|e| MonitorError::io(dir, e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if let Some((kind, start)) = file_kind(format, &name) {
            found.push((kind, start, entry.path()));
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(k, _, p)| (k, p)).collect())
}

/// Reads every monitor file of rank folder `dir` into `table`: the statistic `stat` of each row.
pub fn read_rank(
    format: Format,
    dir: &Path,
    stat: &str,
    table: &mut RankTable,
) -> Result<(), MonitorError> {
    // A rank folder with no file yet (a run just started) holds no rows: not an error here;
    // a pair with nothing to compare is (see `pair::compare`).
    let files = files(format, dir)?;
    for (kind, path) in files {
        match kind {
            FileKind::V1(kind) => read_v1_file(&path, kind, stat, table)?,
            FileKind::V2(monitor) => read_v2_file(&path, monitor, stat, table)?,
        }
    }
    Ok(())
}

/// The columns a file needs, found in its header.
struct Columns {
    stage: usize,
    name: usize,
    step: usize,
    micro_step: Option<usize>,
    scope: Option<usize>,
    stat: usize,
}

fn columns(
    lines: &CsvLines,
    name_col: &str,
    scope: bool,
    stat: &str,
) -> Result<Columns, MonitorError> {
    let need = |c: &str| {
        lines.column(c).ok_or_else(|| {
            MonitorError::format(
                lines.path(),
                format!("no column `{c}` in the header ({})", lines.header.join(",")),
            )
        })
    };
    Ok(Columns {
        stage: need("vpp_stage")?,
        name: need(name_col)?,
        step: need("step")?,
        micro_step: lines.column("micro_step"),
        scope: if scope { Some(need("scope")?) } else { None },
        stat: lines.column(stat).ok_or_else(|| {
            MonitorError::format(
                lines.path(),
                format!(
                    "no statistic `{stat}` (the monitor's ops) in the header ({})",
                    lines.header.join(",")
                ),
            )
        })?,
    })
}

/// One row's common fields, parsed.
struct Row<'a> {
    stage: i32,
    name: &'a str,
    step: i64,
    micro_step: u32,
    value: Option<f64>,
}

fn parse_row<'a>(
    lines: &CsvLines,
    cols: &Columns,
    f: &'a [String],
) -> Result<Row<'a>, MonitorError> {
    let field = |i: usize| {
        f.get(i).map(String::as_str).ok_or_else(|| {
            lines.error(format!(
                "{} fields, the header has {}",
                f.len(),
                lines.header.len()
            ))
        })
    };
    let int = |i: usize, what: &str| -> Result<i64, MonitorError> {
        let t = field(i)?.trim();
        // pandas may write an integer column as a float (`3.0`).
        t.parse::<i64>()
            .ok()
            .or_else(|| {
                t.parse::<f64>()
                    .ok()
                    .filter(|x| x.fract() == 0.0)
                    .map(|x| x as i64)
            })
            .ok_or_else(|| lines.error(format!("{what} {t:?} is not an integer")))
    };
    let stage = int(cols.stage, "vpp_stage")?;
    let step = int(cols.step, "step")?;
    let micro_step = match cols.micro_step {
        Some(i) if !field(i)?.trim().is_empty() => int(i, "micro_step")?,
        _ => 0,
    };
    let stat_text = field(cols.stat)?;
    let value = parse_value(stat_text);
    if value.is_none() && !stat_text.trim().is_empty() {
        return Err(lines.error(format!("statistic {stat_text:?} is not a number")));
    }
    Ok(Row {
        stage: i32::try_from(stage).map_err(|_| lines.error("vpp_stage out of range"))?,
        name: field(cols.name)?,
        step,
        micro_step: u32::try_from(micro_step.max(0))
            .map_err(|_| lines.error("micro_step out of range"))?,
        value,
    })
}

fn store(
    lines: &CsvLines,
    table: &mut RankTable,
    key: &SeriesKey,
    row: &Row,
) -> Result<(), MonitorError> {
    if let Some(value) = row.value {
        table.insert(key, row.step, value).map_err(|_| {
            lines.error(format!(
                "step {} is too far from the series' other steps",
                row.step
            ))
        })?;
    }
    Ok(())
}

fn read_v1_file(
    path: &Path,
    kind: Kind,
    stat: &str,
    table: &mut RankTable,
) -> Result<(), MonitorError> {
    let Some(mut lines) = CsvLines::open(path)? else {
        return Ok(());
    };
    let cols = columns(&lines, "name", false, stat)?;
    let mut f = Vec::new();
    let mut key = SeriesKey {
        kind,
        stage: 0,
        base: String::new(),
        role: Role::None,
        micro_step: 0,
    };
    while lines.next_fields(&mut f)? {
        let row = parse_row(&lines, &cols, &f)?;
        let (prefix, full) = name::split_stage(row.name.trim());
        let (base, role) = if kind.is_activation() {
            name::parse_v1_activation(full).ok_or_else(|| {
                lines.error(format!(
                    "activation name {full:?} is not <module>.input or <module>.output"
                ))
            })?
        } else {
            (full, Role::None)
        };
        key.stage = name::stage_of(row.stage, prefix);
        key.base.clear();
        key.base.push_str(base);
        key.role = role;
        key.micro_step = row.micro_step;
        store(&lines, table, &key, &row)?;
    }
    Ok(())
}

fn read_v2_file(
    path: &Path,
    monitor: V2Monitor,
    stat: &str,
    table: &mut RankTable,
) -> Result<(), MonitorError> {
    let Some(mut lines) = CsvLines::open(path)? else {
        return Ok(());
    };
    let cols = columns(&lines, "module_name", true, stat)?;
    let scope_col = cols.scope.unwrap_or(0);
    let mut f = Vec::new();
    let mut key = SeriesKey {
        kind: Kind::Actv,
        stage: 0,
        base: String::new(),
        role: Role::None,
        micro_step: 0,
    };
    while lines.next_fields(&mut f)? {
        let row = parse_row(&lines, &cols, &f)?;
        let scope = f.get(scope_col).map(|s| s.trim()).unwrap_or("");
        let (prefix, full) = name::split_stage(row.name.trim());
        let bad_scope = || lines.error(format!("unknown scope {scope:?}"));
        let (kind, base, role) = match monitor {
            V2Monitor::Module => {
                let (module, role, grad) = name::parse_v2_activation(full).ok_or_else(|| {
                    lines.error(format!("module tensor name {full:?} is not <module>.<input|output|grad_input|grad_output>.<i>"))
                })?;
                let kind = match (scope, grad) {
                    ("forward", false) => Kind::Actv,
                    ("backward", true) => Kind::ActvGrad,
                    _ => return Err(bad_scope()),
                };
                (kind, module, role)
            }
            V2Monitor::WeightGrad => match scope {
                "unreduced" => (Kind::GradUnreduced, full, Role::None),
                "reduced" => (Kind::GradReduced, full, Role::None),
                _ => return Err(bad_scope()),
            },
            V2Monitor::Optimizer => {
                let kind = match scope {
                    "exp_avg" => Kind::ExpAvg,
                    "exp_avg_sq" => Kind::ExpAvgSq,
                    _ => return Err(bad_scope()),
                };
                let param = full.strip_suffix(&format!(".{scope}")).unwrap_or(full);
                (kind, param, Role::None)
            }
            V2Monitor::Param => match scope {
                "param_origin" => (Kind::ParamOrigin, full, Role::None),
                "param_updated" => (Kind::ParamUpdated, full, Role::None),
                _ => return Err(bad_scope()),
            },
        };
        key.kind = kind;
        key.stage = name::stage_of(row.stage, prefix);
        key.base.clear();
        key.base.push_str(base);
        key.role = role;
        key.micro_step = row.micro_step;
        store(&lines, table, &key, &row)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names() {
        assert_eq!(
            file_kind(Format::V1, "actv_grad_0-99.csv"),
            Some((FileKind::V1(Kind::ActvGrad), 0))
        );
        assert_eq!(
            file_kind(Format::V1, "grad_reduced_100-199.csv"),
            Some((FileKind::V1(Kind::GradReduced), 100))
        );
        assert_eq!(file_kind(Format::V1, "stack_info.csv"), None);
        assert_eq!(file_kind(Format::V1, "other_0-9.csv"), None);
        assert_eq!(
            file_kind(Format::V2, "weight_grad_step5-9.csv"),
            Some((FileKind::V2(V2Monitor::WeightGrad), 5))
        );
        assert_eq!(file_kind(Format::V2, "cc_step0-0.csv"), None);
    }

    #[test]
    fn stages_from_the_prefix_or_the_column() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("module_step0-0.csv"),
            "vpp_stage,step,module_name,scope,norm\n\
             1,0,1:layers.0.fc1.input.0,forward,2.0\n\
             -1,0,head.grad_output.0,backward,3.0\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("optimizer_step0-0.csv"),
            "vpp_stage,step,module_name,scope,norm\n0,0,0:head.weight.exp_avg_sq,exp_avg_sq,4.0\n",
        )
        .unwrap();
        let mut t = RankTable::default();
        read_rank(Format::V2, dir.path(), "norm", &mut t).unwrap();
        let keys: Vec<_> = t
            .series()
            .iter()
            .map(|k| (k.kind, k.stage, k.base.as_str(), k.role))
            .collect();
        assert_eq!(
            keys,
            [
                (Kind::Actv, 1, "layers.0.fc1", Role::Input(0)),
                (Kind::ActvGrad, 0, "head", Role::Output(0)),
                (Kind::ExpAvgSq, 0, "head.weight", Role::None),
            ]
        );
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("actv_0-0.csv"),
            "vpp_stage,name,step,micro_step,norm\n0,a.input,0,0,1.5\n0,a.output,x,0,2\n",
        )
        .unwrap();
        let mut t = RankTable::default();
        let e = read_rank(Format::V1, dir.path(), "norm", &mut t)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("actv_0-0.csv: line 3: step \"x\" is not an integer"),
            "{e}"
        );
        let e = read_rank(Format::V1, dir.path(), "mean", &mut t)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no statistic `mean`"), "{e}");
    }
}
