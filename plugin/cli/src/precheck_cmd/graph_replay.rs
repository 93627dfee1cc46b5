//! One graph's replays of both runs, and their calls paired (the target's with the golden call its
//! match or its name gives).

use std::collections::HashMap;

use graph_ascend_replay::{CallReport, DumpRun};

use super::inputs::{Pairing, Role};

/// One run's replay.
pub struct Run {
    pub role: Role,
    pub dump: DumpRun,
    pub calls: Vec<CallReport>,
}

/// A target call and the golden call it pairs with (either may be missing).
#[derive(Clone, Copy)]
pub struct Paired<'a> {
    pub target: Option<&'a CallReport>,
    pub golden: Option<&'a CallReport>,
}

/// One graph's replays: the target run, the golden run, their pairs.
pub struct GraphReplay {
    pub pairing: Pairing,
    pub target: Run,
    pub golden: Option<Run>,
}

impl GraphReplay {
    /// The API forward calls paired: the target's in its order (each with the golden call its
    /// match or its name gives), then the golden's that no target call took.
    pub fn pairs(&self) -> Vec<Paired<'_>> {
        let golden: HashMap<&str, &CallReport> = self
            .golden
            .iter()
            .flat_map(|g| g.calls.iter())
            .map(|c| (c.name.as_str(), c))
            .collect();
        let mut taken = std::collections::HashSet::new();
        let mut out = Vec::new();
        for t in self.target.calls.iter().filter(|c| is_api_forward(c)) {
            let g = golden.get(self.pairing.golden_of(&t.name)).copied();
            if let Some(g) = g {
                taken.insert(g.name.as_str());
            }
            out.push(Paired {
                target: Some(t),
                golden: g,
            });
        }
        for g in self.golden.iter().flat_map(|g| g.calls.iter()) {
            if is_api_forward(g) && !taken.contains(g.name.as_str()) {
                out.push(Paired {
                    target: None,
                    golden: Some(g),
                });
            }
        }
        out
    }

    pub fn runs(&self) -> impl Iterator<Item = &Run> {
        std::iter::once(&self.target).chain(self.golden.iter())
    }
}

/// An API call's forward record (not a module's, not a backward one).
pub fn is_api_forward(c: &CallReport) -> bool {
    !c.api.is_empty() && c.name.contains(".forward")
}
