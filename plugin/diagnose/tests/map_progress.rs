//! The divergence map's progress: every graph read is told, in order, of the right total, and
//! after each judged step the map of the steps judged so far, the last of them the whole map.

mod common;

use common::{replicate, unpack};
use graph_ascend_diagnose::{
    divergence_map, divergence_map_with_progress, CompareFile, MapOptions, Options,
};

#[test]
fn progress_counts_every_graph_and_the_partial_maps_grow_to_the_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = unpack("compare_tf_stats", dir.path());
    replicate(&rusqlite::Connection::open(&path).expect("db"), 3, 2);
    let file = CompareFile::open(&path).expect("open");
    let steps = file.steps();
    assert_eq!(steps, [0, 1, 2]);
    let total = steps.len() * file.ranks().len().max(1);
    let mut read = Vec::new();
    let mut partial = Vec::new();
    let (_, whole) = divergence_map_with_progress(
        &file,
        &Options::default(),
        &MapOptions::default(),
        true,
        &mut |p| {
            assert_eq!(p.graphs_total, total);
            match p.partial {
                Some(m) => partial.push((p.graphs_read, m.clone())),
                None => read.push(p.graphs_read),
            }
        },
    )
    .expect("map");
    assert_eq!(read, (1..=total).collect::<Vec<_>>());
    assert_eq!(partial.len(), steps.len());
    for (k, (at, m)) in partial.iter().enumerate() {
        assert_eq!(m.steps, steps[..=k], "after step {k}");
        assert!(m.columns.iter().all(|c| steps[..=k].contains(&c.step)));
        assert_eq!(*at, (k + 1) * total / steps.len());
    }
    assert_eq!(partial.last().map(|(_, m)| m), Some(&whole));
    // Without partial maps: the same map, and no map handed out on the way.
    let (_, plain) =
        divergence_map(&file, &Options::default(), &MapOptions::default()).expect("map");
    assert_eq!(plain, whole);
}

#[test]
fn the_first_step_is_shown_graph_by_graph_before_it_is_judged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = unpack("compare_tf_stats", dir.path());
    replicate(&rusqlite::Connection::open(&path).expect("db"), 3, 2);
    let file = CompareFile::open(&path).expect("open");
    let steps = file.steps();
    let ranks = file.ranks().len().max(1);
    // Without tightening, a cell judged as its graph is read is the judged cell without its marks.
    let opts = Options {
        tighten: false,
        ..Options::default()
    };
    let mut previews = Vec::new();
    let mut judged_at = Vec::new();
    let (_, whole) =
        divergence_map_with_progress(&file, &opts, &MapOptions::default(), true, &mut |p| {
            if let Some(m) = p.preview {
                assert!(p.partial.is_none());
                previews.push((p.graphs_read, judged_at.len(), m.clone()));
            }
            if p.partial.is_some() {
                judged_at.push(p.graphs_read);
            }
        })
        .expect("map");
    // The first graph read shows at once; only the first step's graphs, before it is judged.
    assert_eq!(previews.first().map(|(at, _, _)| *at), Some(1));
    for (at, judged, m) in &previews {
        assert!(*at <= ranks && *judged == 0, "a preview after graph {at}");
        assert_eq!(m.steps, steps[..1]);
        assert!(!m.columns.is_empty() && m.columns.len() <= *at);
        for (k, c) in m.columns.iter().enumerate() {
            assert_eq!((c.step, c.width), (steps[0], 1));
            // The same column of the whole map: the same step and rank.
            let w = whole
                .columns
                .iter()
                .position(|x| x.step == c.step && x.rank_first == c.rank_first)
                .expect("the column in the whole map");
            let mut cells = 0;
            for band in &m.bands {
                let whole_band = whole
                    .bands
                    .iter()
                    .find(|b| b.direction == band.direction)
                    .expect("band");
                for row in &band.rows {
                    let whole_row = whole_band
                        .rows
                        .iter()
                        .find(|r| r.module == row.module)
                        .expect("row");
                    let (Some(a), Some(b)) = (&row.cells[k], &whole_row.cells[w]) else {
                        assert_eq!(row.cells[k].is_some(), whole_row.cells[w].is_some());
                        continue;
                    };
                    assert_eq!((a.ratio, a.err, &a.node), (b.ratio, b.err, &b.node));
                    assert_eq!((a.sources, a.source.as_ref(), a.from_rank), (0, None, None));
                    cells += 1;
                }
            }
            assert!(cells > 0);
        }
    }
    // Later steps come judged, step by step, as before.
    assert_eq!(judged_at.len(), steps.len());
}
