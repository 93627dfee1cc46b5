//! The self-contained report as one HTML file: the page's own built assets (its script and
//! styles, as the wheel installs them beside the plugin) inlined, and the report's data embedded
//! as JSON. Opened from disk, it needs no server and no network (its content security policy
//! forbids every connection); the page's static data source answers its requests from the data.
//!
//! Strings from the file are data: the JSON is escaped so that no `<`, `>` or `&` appears in it
//! (`\u003c`, ...), so nothing in it can end the `<script>` element that holds it; the script and
//! the styles are escaped the same way where they could.

use std::path::{Path, PathBuf};

/// Why the page's assets cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ReportPageError {
    #[error(
        "the page's built assets are not in {}: they come with the graph-ascend wheel (the plugin's \
         static/ folder), or in a source checkout from `make frontend` (npm); point at them with \
         --assets DIR",
        .0.display()
    )]
    Missing(PathBuf),
    #[error("cannot read {}: {source}", .path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {what} (not a build of the GRAPH_ASCEND page?)", .path.display())]
    Unexpected { path: PathBuf, what: &'static str },
}

/// The page's script and styles, read from a build (`index.html` and what it links).
#[derive(Debug, Clone)]
pub struct PageAssets {
    pub script: String,
    pub styles: String,
}

/// The HTML element id of the embedded data (the page's `frontend/src/report/` reads it).
pub const REPORT_DATA_ID: &str = "graph-ascend-report";

/// Whether `dir` holds a build of the page.
pub fn has_page_assets(dir: &Path) -> bool {
    dir.join("index.html").is_file()
}

/// Reads the page's build in `dir` (`index.html`, its module script and its style sheet).
pub fn page_assets(dir: &Path) -> Result<PageAssets, ReportPageError> {
    let index = dir.join("index.html");
    if !index.is_file() {
        return Err(ReportPageError::Missing(dir.to_path_buf()));
    }
    let read = |path: &Path| {
        std::fs::read_to_string(path).map_err(|source| ReportPageError::Unreadable {
            path: path.to_path_buf(),
            source,
        })
    };
    let html = read(&index)?;
    let script = linked(&html, "<script", "src=\"").ok_or(ReportPageError::Unexpected {
        path: index.clone(),
        what: "no module script",
    })?;
    let sheet = linked(&html, "<link rel=\"stylesheet\"", "href=\"").ok_or(
        ReportPageError::Unexpected {
            path: index.clone(),
            what: "no style sheet",
        },
    )?;
    let inside = |rel: &str| -> Result<PathBuf, ReportPageError> {
        let rel = rel.trim_start_matches("./");
        if rel.contains("..") || rel.starts_with('/') || rel.contains(':') {
            return Err(ReportPageError::Unexpected {
                path: index.clone(),
                what: "an asset outside the build",
            });
        }
        Ok(dir.join(rel))
    };
    Ok(PageAssets {
        script: read(&inside(&script)?)?,
        styles: read(&inside(&sheet)?)?,
    })
}

/// The value of `attr` (`src="`) in the first tag of `html` that starts with `tag`.
fn linked(html: &str, tag: &str, attr: &str) -> Option<String> {
    let start = html.find(tag)?;
    let end = start + html[start..].find('>')?;
    let element = &html[start..end];
    let at = element.find(attr)? + attr.len();
    let len = element[at..].find('"')?;
    Some(element[at..at + len].to_owned())
}

/// JSON that can sit in a `<script>` element: `<`, `>`, `&` and the two line separators
/// JavaScript once refused in strings written as `\u` escapes (they only occur inside JSON
/// strings, where the escape means the same character).
pub fn script_safe_json(value: &serde_json::Value) -> String {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "null".into());
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Text of a script or style sheet made unable to end its element: each `<` that starts
/// `</script`, `<!--` or `<script` (`</style` in styles) becomes `\x3C` (the same character in
/// JavaScript strings, templates and regular expressions) or `\3C ` (CSS).
fn inline_safe(text: &str, closers: &[&str], escape: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (at, _) in lower.match_indices('<') {
        if closers.iter().any(|c| lower[at..].starts_with(c)) {
            out.push_str(&text[last..at]);
            out.push_str(escape);
            last = at + 1;
        }
    }
    out.push_str(&text[last..]);
    out
}

/// Text for an HTML element's content or attribute.
fn html_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The report's one HTML file.
pub fn report_html(assets: &PageAssets, data: &serde_json::Value, title: &str) -> String {
    let script = inline_safe(&assets.script, &["</script", "<!--", "<script"], "\\x3C");
    let styles = inline_safe(&assets.styles, &["</style", "<!--"], "\\3C ");
    let json = script_safe_json(data);
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\" />\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\" />\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; \
         style-src 'unsafe-inline'; img-src data: blob:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'\" />\n\
         <link rel=\"icon\" href=\"data:,\" />\n<title>{title}</title>\n<style>\n{styles}\n</style>\n\
         <script type=\"application/json\" id=\"{REPORT_DATA_ID}\">{json}</script>\n</head>\n<body>\n\
         <div id=\"app\"></div>\n<script type=\"module\">\n{script}\n</script>\n</body>\n</html>\n",
        title = html_text(title),
    )
}

/// Now, in UTC, as RFC 3339 (`2026-11-28T10:24:30Z`).
pub fn utc_now() -> String {
    let [year, month, day, hour, minute, second] = graph_ascend_convert::utc_now_fields();
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_is_rfc_3339() {
        let now = utc_now();
        assert_eq!(now.len(), 20, "{now}");
        assert!(
            now.starts_with("20") && now.ends_with('Z') && now.as_bytes()[10] == b'T',
            "{now}"
        );
    }

    #[test]
    fn json_in_a_script_cannot_end_it() {
        let v =
            serde_json::json!({"name": "</script><script>alert(1)</script>", "a&b": "x\u{2028}y"});
        let s = script_safe_json(&v);
        assert!(!s.contains('<') && !s.contains('>') && !s.contains('&'));
        assert_eq!(serde_json::from_str::<serde_json::Value>(&s).ok(), Some(v));
    }

    #[test]
    fn scripts_and_styles_cannot_end_their_element() {
        let js = inline_safe(
            "a='</SCRIPT>';b='<!--';c='<div>'",
            &["</script", "<!--", "<script"],
            "\\x3C",
        );
        assert_eq!(js, "a='\\x3C/SCRIPT>';b='\\x3C!--';c='<div>'");
        let css = inline_safe("a{content:'</style>'}", &["</style", "<!--"], "\\3C ");
        assert_eq!(css, "a{content:'\\3C /style>'}");
    }

    #[test]
    fn a_build_is_read_and_a_missing_one_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(matches!(
            page_assets(dir.path()),
            Err(ReportPageError::Missing(_))
        ));
        std::fs::create_dir(dir.path().join("assets")).expect("assets");
        std::fs::write(
            dir.path().join("index.html"),
            "<head><script type=\"module\" crossorigin src=\"./assets/app-1.js\"></script>\n<link rel=\"stylesheet\" crossorigin href=\"./assets/app-2.css\"></head>",
        )
        .expect("index");
        std::fs::write(dir.path().join("assets/app-1.js"), "console.log(1)").expect("js");
        std::fs::write(dir.path().join("assets/app-2.css"), "body{}").expect("css");
        let a = page_assets(dir.path()).expect("assets");
        assert_eq!(
            (a.script.as_str(), a.styles.as_str()),
            ("console.log(1)", "body{}")
        );
        let html = report_html(&a, &serde_json::json!({"x": "<b>"}), "t<i>");
        assert!(html.contains("<title>t&lt;i&gt;</title>"));
        assert!(html.contains("{\"x\":\"\\u003cb\\u003e\"}"));
    }
}
