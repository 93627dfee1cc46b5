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
