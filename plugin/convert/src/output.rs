//! The output's name: `{build|compare}_{YYYYmmddHHMMSS}.vis.db`, as msprobe names it (a
//! conversion's and a gather's).

use std::path::{Path, PathBuf};

use crate::error::ConvertError;
use crate::options::ConvertOptions;

/// The output folder (created if missing) and the name of the file in it.
pub(crate) fn output_path(opts: &ConvertOptions) -> Result<PathBuf, ConvertError> {
    std::fs::create_dir_all(&opts.output).map_err(|source| ConvertError::Output {
        path: opts.output.clone(),
        source,
    })?;
    Ok(output_file(&opts.output, opts.golden.is_some()))
}

/// `{build|compare}_{YYYYmmddHHMMSS}.vis.db` in `dir` (the gather names its output so too).
pub(crate) fn output_file(dir: &Path, compare: bool) -> PathBuf {
    let kind = if compare { "compare" } else { "build" };
    dir.join(format!("{kind}_{}.vis.db", timestamp()))
}

/// `YYYYmmddHHMMSS` of now (UTC), as in msprobe's output names.
fn timestamp() -> String {
    let [year, month, day, hour, minute, second] = utc_now_fields();
    format!("{year:04}{month:02}{day:02}{hour:02}{minute:02}{second:02}")
}

/// Now in UTC: year, month, day, hour, minute, second (the output's name; the report's time).
pub fn utc_now_fields() -> [i64; 6] {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    [year, month, day, rem / 3600, rem % 3600 / 60, rem % 60]
}
