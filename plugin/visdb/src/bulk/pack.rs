//! How sorted cells are cut into pages, bottom-up.
//!
//! SQLite rejects a child page without cells (`getAndInitPage` reports corruption), so neither
//! function ever leaves a page empty: when the greedy cut would leave nothing for the last page it
//! moves one cell over. Pages of at least 512 bytes fit four of the largest cells (local payload
//! is capped below a quarter of the page), so a full page always has cells to spare.

use std::ops::Range;

use super::format::cell_cost;

/// Children `0..n` of one interior level, where cell `i` (`sizes[i]`, `sizes.len() == n - 1`)
/// carries child `i` and its divider. Returns each page's children `a..=b`: cells `a..b` and
/// right-most child `b`; divider `b` goes up to the parent level. Needs `n >= 2`.
pub fn group_children(sizes: &[usize], capacity: usize) -> Vec<(usize, usize)> {
    let last = sizes.len();
    let mut groups = Vec::new();
    let mut a = 0;
    loop {
        let mut b = greedy_end(sizes, a, capacity);
        if b == last {
            groups.push((a, b));
            return groups;
        }
        if b + 1 == last {
            // The next page would hold only the last child, with no cell.
            debug_assert!(b > a + 1);
            b -= 1;
        }
        groups.push((a, b));
        a = b + 1;
    }
}

/// Sorted index entries of `sizes` cut into leaves; the entry after each leaf but the last is
/// its divider and moves to the parent level. Zero entries give one empty leaf (a root).
pub fn group_leaves(sizes: &[usize], capacity: usize) -> Vec<Range<usize>> {
    let m = sizes.len();
    let mut leaves = Vec::new();
    let mut a = 0;
    loop {
        let mut b = greedy_end(sizes, a, capacity);
        if b == m {
            leaves.push(a..m);
            return leaves;
        }
        if b + 1 == m {
            // The divider would be the last entry, leaving the last leaf empty.
            debug_assert!(b > a + 1);
            b -= 1;
        }
        leaves.push(a..b);
        a = b + 1;
    }
}

/// The end of the longest run of cells from `a` that fits in `capacity` (at least one cell).
fn greedy_end(sizes: &[usize], a: usize, capacity: usize) -> usize {
    let mut used = 0;
    let mut b = a;
    while b < sizes.len() && used + cell_cost(sizes[b]) <= capacity {
        used += cell_cost(sizes[b]);
        b += 1;
    }
    if b == a && b < sizes.len() {
        // Unreachable with SQLite's payload limits; never loop forever.
        b += 1;
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interior_pages_never_end_with_a_lone_child() {
        // 10-byte cells cost 12; 36 bytes fit 3 cells.
        for n in 2..40 {
            let sizes = vec![10; n - 1];
            let groups = group_children(&sizes, 36);
            let mut next = 0;
            for &(a, b) in &groups {
                assert_eq!(a, next);
                assert!(b > a, "n={n}: group {a}..={b} has no cell");
                assert!(b - a <= 3);
                next = b + 1;
            }
            assert_eq!(next, n, "n={n}: every child placed");
        }
    }

    #[test]
    fn leaves_and_dividers_cover_every_entry_once() {
        for m in 0..40 {
            let sizes = vec![10; m];
            let leaves = group_leaves(&sizes, 36);
            let mut next = 0;
            for (i, r) in leaves.iter().enumerate() {
                assert_eq!(r.start, next);
                assert!(m == 0 || !r.is_empty(), "m={m}: empty leaf");
                assert!(r.len() <= 3);
                next = if i + 1 < leaves.len() {
                    r.end + 1
                } else {
                    r.end
                };
            }
            assert_eq!(next, m);
        }
    }
}
