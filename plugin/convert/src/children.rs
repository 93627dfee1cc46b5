//! The children of one graph's nodes, in one list of `u32` node numbers.
//!
//! Each node held a `Vec<usize>` of its children: 24 bytes in the node and, for a node with
//! children, an allocation of at least four `usize` (48 bytes with the allocator's header).
//! Here a graph holds one list of every node's children, each node's run in it as 8 bytes
//! (where it starts, how long it is): about 12 bytes a node. Child order is kept exactly (it is
//! the written `subnodes` order). A built graph lists each node under its parent once; a
//! merged graph may list a node under several parents (`to_graph`), which runs allow.
//!
//! A hierarchy is made from its `(parent, child)` links in the order they are made
//! ([`ChildLists::set_links`]: one pass, no per-node growth); later additions
//! ([`ChildLists::push`], [`ChildLists::set`]) append runs at the end of the list, and the
//! runs left behind are dropped once they are half the list.

/// Node numbers and list places are `u32`: a graph holds fewer than `u32::MAX` nodes (see
/// `graph::NO_NODE`), and a built list holds each node once. A child past that is not listed.
#[derive(Debug, Clone, Default)]
pub struct ChildLists {
    /// Node `n`'s children: `list[start..start + len]` for `runs[n] == (start, len)`.
    runs: Vec<(u32, u32)>,
    list: Vec<u32>,
    /// Entries of `list` no run covers any more.
    unused: usize,
}

/// A node's children, as node numbers.
pub type Children<'a> = std::iter::Map<std::slice::Iter<'a, u32>, fn(&u32) -> usize>;

fn widen(c: &u32) -> usize {
    *c as usize
}

impl ChildLists {
    /// Replaces every list by the `(parent, child)` links that `links` gives (the same each
    /// time it is called: it is walked twice), each parent's children in the order of the
    /// links.
    pub fn set_links<I: Iterator<Item = (usize, usize)>>(&mut self, links: impl Fn() -> I) {
        let mut runs = std::mem::take(&mut self.runs);
        runs.fill((0, 0));
        for (p, _) in links() {
            if let Some(r) = runs.get_mut(p) {
                r.1 += 1;
            }
        }
        let mut start = 0u32;
        for r in &mut runs {
            r.0 = start;
            start = start.saturating_add(r.1);
            // `len` counts the children placed so far while the list is filled.
            r.1 = 0;
        }
        let mut list = vec![0u32; start as usize];
        for (p, c) in links() {
            let (Some(r), Ok(c)) = (runs.get_mut(p), u32::try_from(c)) else {
                continue;
            };
            if let Some(slot) = list.get_mut((r.0 + r.1) as usize) {
                *slot = c;
                r.1 += 1;
            }
        }
        *self = ChildLists {
            runs,
            list,
            unused: 0,
        };
    }

    /// Adds a node without children.
    pub fn push_node(&mut self) {
        self.runs.push((0, 0));
    }

    /// Room for `nodes` more nodes.
    pub fn reserve_nodes(&mut self, nodes: usize) {
        self.runs.reserve(nodes);
    }

    /// Node `n`'s children (none for a number past the last node).
    pub fn of(&self, n: usize) -> Children<'_> {
        self.run(n).iter().map(widen as fn(&u32) -> usize)
    }

    /// Node `n`'s `k`-th child.
    pub fn at(&self, n: usize, k: usize) -> Option<usize> {
        self.run(n).get(k).map(widen)
    }

    fn run(&self, n: usize) -> &[u32] {
        self.runs
            .get(n)
            .and_then(|&(start, len)| self.list.get(start as usize..(start + len) as usize))
            .unwrap_or(&[])
    }

    /// Appends `child` to node `n`'s children.
    pub fn push(&mut self, n: usize, child: usize) {
        let (Some(&(start, len)), Ok(child)) = (self.runs.get(n), u32::try_from(child)) else {
            return;
        };
        if len == 0 || (start + len) as usize != self.list.len() {
            // The run moves to the end of the list, where it can grow.
            let Ok(end) = u32::try_from(self.list.len()) else {
                return;
            };
            self.list
                .extend_from_within(start as usize..(start + len) as usize);
            self.runs[n].0 = end;
            self.unused += len as usize;
        }
        self.list.push(child);
        self.runs[n].1 += 1;
        self.drop_unused_runs();
    }

    /// Replaces node `n`'s children.
    pub fn set(&mut self, n: usize, children: impl IntoIterator<Item = usize>) {
        let (Some(&(_, old)), Ok(start)) = (self.runs.get(n), u32::try_from(self.list.len()))
        else {
            return;
        };
        self.list
            .extend(children.into_iter().filter_map(|c| u32::try_from(c).ok()));
        let len = u32::try_from(self.list.len() - start as usize).unwrap_or(0);
        self.runs[n] = (start, len);
        self.unused += old as usize;
        self.drop_unused_runs();
    }

    /// Rewrites the list without the entries no run covers, once they are half of it (so a
    /// node's additions cost a constant time on average).
    fn drop_unused_runs(&mut self) {
        if self.unused <= self.list.len() / 2 {
            return;
        }
        let mut list = Vec::with_capacity(self.list.len() - self.unused);
        for r in &mut self.runs {
            let start = list.len() as u32;
            let run = self.list.get(r.0 as usize..(r.0 + r.1) as usize);
            list.extend_from_slice(run.unwrap_or(&[]));
            r.0 = start;
        }
        self.list = list;
        self.unused = 0;
    }

    /// Gives back the room not used.
    pub fn shrink_to_fit(&mut self) {
        self.runs.shrink_to_fit();
        self.list.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lists(c: &ChildLists, nodes: usize) -> Vec<Vec<usize>> {
        (0..nodes).map(|n| c.of(n).collect()).collect()
    }

    #[test]
    fn links_keep_their_order_and_additions_move_runs() {
        // Links interleaved between parents, as construct.json gives them.
        let mut c = ChildLists::default();
        for _ in 0..5 {
            c.push_node();
        }
        c.push(3, 4);
        c.set_links(|| [(0, 1), (1, 2), (0, 3), (1, 4), (0, 2)].into_iter());
        assert_eq!(
            lists(&c, 5),
            [vec![1, 3, 2], vec![2, 4], vec![], vec![], vec![]]
        );
        c.push_node();
        c.push(5, 0);
        c.push(1, 5);
        c.push(0, 4);
        c.push(1, 0);
        assert_eq!(
            lists(&c, 6),
            [
                vec![1, 3, 2, 4],
                vec![2, 4, 5, 0],
                vec![],
                vec![],
                vec![],
                vec![0]
            ]
        );
        c.set(0, [3]);
        c.set(4, [1, 1]);
        assert_eq!(c.of(0).collect::<Vec<_>>(), [3]);
        assert_eq!(c.of(4).collect::<Vec<_>>(), [1, 1]);
        assert_eq!(c.of(1).rev().collect::<Vec<_>>(), [0, 5, 4, 2]);
        assert_eq!(c.of(9).len(), 0);
        // Runs left behind were dropped along the way: the list stays near what is listed.
        assert!(c.list.len() <= 2 * 9, "{}", c.list.len());
    }

    /// Many additions to nodes in turn (each moves its run) cost a list of bounded size.
    #[test]
    fn runs_left_behind_are_dropped() {
        let mut c = ChildLists::default();
        for _ in 0..100 {
            c.push_node();
        }
        for k in 0..10_000 {
            c.push(k % 100, k);
        }
        assert!(c.list.len() <= 2 * 10_000 + 2, "{}", c.list.len());
        assert_eq!(
            c.of(7).collect::<Vec<_>>(),
            (0..100).map(|i| i * 100 + 7).collect::<Vec<_>>()
        );
    }
}
