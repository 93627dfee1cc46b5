//! CSV text: the one writer of every CSV line the project makes (`export-csv` and the page's
//! "Download CSV", `diagnose --format csv`, `diagnose --map --format csv`).
//!
//! Fields are quoted as RFC 4180 says (those holding a comma, a quote or a line break). Node
//! names, dtypes and reasons come from a dump, and a spreadsheet runs a cell that starts with
//! `=`, `+`, `-` or `@` (and, in some, a tab or a carriage return) as a formula
//! (`=HYPERLINK(…)`, `+cmd|' /C calc'!A0`): such a text cell is written with a leading `'`, which
//! spreadsheets show as text and never run. A cell that is a number (`-0.25`, `+1e-05`, `-12.5%`,
//! `-inf`) stays as it is, so a negative number is still a number.

/// Appends one CSV line: every field through [`push_field`], separated by commas, ended by
/// CR LF.
pub fn csv_line<'a>(out: &mut String, fields: impl IntoIterator<Item = &'a str>) {
    for (k, f) in fields.into_iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        push_field(out, f);
    }
    out.push_str("\r\n");
}

/// Appends one field: neutralised when a spreadsheet would run it ([`is_formula_like`]), then
/// quoted when it holds a comma, a quote or a line break.
pub fn push_field(out: &mut String, field: &str) {
    let guard = if is_formula_like(field) { "'" } else { "" };
    if field.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(guard);
        out.push_str(&field.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(guard);
        out.push_str(field);
    }
}

/// Whether a spreadsheet would take `field` for a formula: it starts with `=`, `+`, `-`, `@`,
/// a tab or a carriage return, and is not a number.
pub fn is_formula_like(field: &str) -> bool {
    field.starts_with(['=', '+', '-', '@', '\t', '\r']) && !is_number(field)
}

/// A decimal number as spreadsheets and pandas read one: Rust's float syntax (a sign, digits
/// with a point and an exponent, or `inf`, `infinity`, `nan`), optionally followed by `%`.
fn is_number(field: &str) -> bool {
    let plain = field.strip_suffix('%').unwrap_or(field);
    !plain.is_empty() && plain.parse::<f64>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(fields: &[&str]) -> String {
        let mut s = String::new();
        csv_line(&mut s, fields.iter().copied());
        s
    }

    #[test]
    fn fields_are_quoted_when_needed() {
        assert_eq!(
            line(&["a", "b,c", "say \"hi\"", "x\ny"]),
            "a,\"b,c\",\"say \"\"hi\"\"\",\"x\ny\"\r\n"
        );
    }

    /// Regression (issue 42, item 7): node names and dtypes went verbatim into CSV cells, and a
    /// spreadsheet ran `=HYPERLINK(…)`, `+cmd|…`, `@SUM(…)`, `-2+3+cmd|…`.
    #[test]
    fn formula_cells_are_neutralised_and_numbers_kept() {
        assert_eq!(
            line(&[
                "=HYPERLINK(\"http://x\",\"y\")",
                "+cmd|' /C calc'!A0",
                "@SUM(A1:A2)",
                "-2+3+cmd|' /C calc'!A0",
                "\tTorch.add",
                "\r=1",
            ]),
            "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\",'+cmd|' /C calc'!A0,'@SUM(A1:A2),\
             '-2+3+cmd|' /C calc'!A0,'\tTorch.add,\"'\r=1\"\r\n"
        );
        for number in [
            "-0.25",
            "+1e-05",
            "-3",
            "-12.5%",
            "-inf",
            "-Infinity",
            "-NaN",
            "7",
        ] {
            assert_eq!(line(&[number]), format!("{number}\r\n"), "{number}");
        }
        for text in ["-", "+", "-%", "- 1", "-1-1", "-0x10", "=1"] {
            assert_eq!(line(&[text]), format!("'{text}\r\n"), "{text}");
        }
        // Only the start counts: a name holding `=` or `-` further on is left as it is.
        assert_eq!(line(&["Module.a-b=c", "x@y"]), "Module.a-b=c,x@y\r\n");
    }
}
