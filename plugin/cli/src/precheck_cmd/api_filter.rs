//! `--api`: which records to replay, by name. A pattern with `*` or `?` is a glob over the whole
//! record name (`Functional.linear.*`, `*softmax*`); any other is a substring of it
//! (`Functional.linear`, `softmax.2.`).

/// A parsed `--api` pattern.
#[derive(Debug, Clone)]
pub enum ApiFilter {
    /// Every record.
    All,
    /// Names containing this.
    Substring(String),
    /// Names matching this glob whole (`*` any run of characters, `?` one character).
    Glob(Vec<char>),
}

impl ApiFilter {
    pub fn new(pattern: Option<&str>) -> ApiFilter {
        match pattern {
            None => ApiFilter::All,
            Some(p) if p.contains(['*', '?']) => ApiFilter::Glob(p.chars().collect()),
            Some(p) => ApiFilter::Substring(p.to_string()),
        }
    }

    pub fn keeps(&self, name: &str) -> bool {
        match self {
            ApiFilter::All => true,
            ApiFilter::Substring(s) => name.contains(s.as_str()),
            ApiFilter::Glob(g) => glob_match(g, &name.chars().collect::<Vec<_>>()),
        }
    }
}

/// Whether `text` matches `glob` whole: the iterative matcher with one backtrack point (the
/// last `*`), linear in practice and never recursive.
fn glob_match(glob: &[char], text: &[char]) -> bool {
    let (mut g, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if g < glob.len() && (glob[g] == '?' || glob[g] == text[t]) {
            g += 1;
            t += 1;
        } else if g < glob.len() && glob[g] == '*' {
            star = Some((g, t));
            g += 1;
        } else if let Some((sg, st)) = star {
            g = sg + 1;
            t = st + 1;
            star = Some((sg, st + 1));
        } else {
            return false;
        }
    }
    glob[g..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::ApiFilter;

    #[test]
    fn substrings_and_globs() {
        let s = ApiFilter::new(Some("linear"));
        assert!(s.keeps("Functional.linear.0.forward"));
        assert!(!s.keeps("Functional.softmax.0.forward"));
        let g = ApiFilter::new(Some("Functional.linear.*"));
        assert!(g.keeps("Functional.linear.0.forward"));
        assert!(!g.keeps("Module.Functional.linear.0.forward"));
        let g = ApiFilter::new(Some("*.?.forward"));
        assert!(g.keeps("Torch.matmul.0.forward"));
        assert!(!g.keeps("Torch.matmul.10.forward"));
        assert!(ApiFilter::new(Some("*")).keeps(""));
        assert!(ApiFilter::new(None).keeps("anything"));
    }
}
