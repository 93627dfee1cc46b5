//! Reading msprobe's monitor CSVs line by line: fields split with CSV quoting (v1 writes
//! `shape` as `"[16, 32]"`), a last line without its newline (a file still being written)
//! reported as torn, so that the caller skips it.
use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::error::MonitorError;

/// Splits one CSV line into `fields` (their allocations reused from the previous line).
/// Quoted fields may hold commas and doubled quotes; msprobe's fields never hold newlines.
/// `false` when a quote is left open.
pub fn split_fields(line: &str, fields: &mut Vec<String>) -> bool {
    let mut n = 0;
    let mut next = |fields: &mut Vec<String>| -> usize {
        if n == fields.len() {
            fields.push(String::new());
        }
        fields[n].clear();
        n += 1;
        n - 1
    };
    let mut at = next(fields);
    if !line.contains('"') {
        for (i, part) in line.split(',').enumerate() {
            if i > 0 {
                at = next(fields);
            }
            fields[at].push_str(part);
        }
        fields.truncate(n);
        return true;
    }
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                fields[at].push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if fields[at].is_empty() => quoted = true,
            (false, ',') => at = next(fields),
            (_, c) => fields[at].push(c),
        }
    }
    fields.truncate(n);
    !quoted
}

/// A CSV file read line by line: the header, then each complete data line.
pub struct CsvLines {
    path: PathBuf,
    reader: std::io::BufReader<std::fs::File>,
    buf: String,
    line: u64,
    pub header: Vec<String>,
}

impl CsvLines {
    /// Opens `path` and reads its header. `Ok(None)` when the file has no complete header line
    /// yet (just created).
    pub fn open(path: &Path) -> Result<Option<CsvLines>, MonitorError> {
        let file = std::fs::File::open(path).map_err(|e| MonitorError::io(path, e))?;
        let mut lines = CsvLines {
            path: path.to_path_buf(),
            reader: std::io::BufReader::with_capacity(1 << 16, file),
            buf: String::new(),
            line: 0,
            header: Vec::new(),
        };
        let mut header = Vec::new();
        if !lines.next_fields(&mut header)? {
            return Ok(None);
        }
        lines.header = header.into_iter().map(|h| h.trim().to_string()).collect();
        Ok(Some(lines))
    }

    /// The next complete line's fields into `fields`; `false` at the end (a torn last line,
    /// one without its newline, is the end too).
    pub fn next_fields(&mut self, fields: &mut Vec<String>) -> Result<bool, MonitorError> {
        loop {
            self.buf.clear();
            let n = self
                .reader
                .read_line(&mut self.buf)
                .map_err(|e| MonitorError::io(&self.path, e))?;
            if n == 0 || !self.buf.ends_with('\n') {
                return Ok(false);
            }
            self.line += 1;
            let text = self.buf.trim_end_matches(['\n', '\r']);
            if text.is_empty() {
                continue;
            }
            if !split_fields(text, fields) {
                return Err(self.error("a quoted field is not closed"));
            }
            return Ok(true);
        }
    }

    /// The column named `name` in the header.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// An error at the current line.
    pub fn error(&self, problem: impl Into<String>) -> MonitorError {
        MonitorError::Csv {
            path: self.path.clone(),
            line: self.line,
            problem: problem.into(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A statistic's text as msprobe writes it: a number, or `nan`/`inf` (pandas), or empty.
pub fn parse_value(text: &str) -> Option<f64> {
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    t.parse::<f64>()
        .ok()
        .or(match t.to_ascii_lowercase().as_str() {
            "nan" => Some(f64::NAN),
            "inf" | "+inf" => Some(f64::INFINITY),
            "-inf" => Some(f64::NEG_INFINITY),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_split() {
        let mut f = Vec::new();
        assert!(split_fields(
            r#"0,embed.input,0,0,16.6,2.5,"[16, 16]",torch.float32"#,
            &mut f
        ));
        assert_eq!(f.len(), 8);
        assert_eq!(f[6], "[16, 16]");
        assert!(!split_fields(r#"0,"[16, 1"#, &mut f));
    }

    #[test]
    fn a_torn_last_line_is_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("actv_0-0.csv");
        std::fs::write(&p, "vpp_stage,name,step\n0,a.input,0\n0,a.out").unwrap();
        let mut lines = CsvLines::open(&p).unwrap().unwrap();
        let mut f = Vec::new();
        assert!(lines.next_fields(&mut f).unwrap());
        assert_eq!(f, ["0", "a.input", "0"]);
        assert!(!lines.next_fields(&mut f).unwrap());
        std::fs::write(&p, "vpp_st").unwrap();
        assert!(CsvLines::open(&p).unwrap().is_none());
    }
}
