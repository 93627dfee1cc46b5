//! The map of any number of columns is the map of full resolution aggregated: each step's
//! columns cut into contiguous runs of `ceil(columns / (max_columns / steps))`, each run's cell
//! the worst of its cells (the first of equals), the sources added up and the first kept. The
//! aggregation is computed here on its own, from the cells of full resolution, and compared with
//! the library's at several numbers of columns.

mod common;

use common::unpack;
use graph_ascend_diagnose::map::{Cell, Column, ColumnAxis, DivergenceMap};
use graph_ascend_diagnose::{divergence_map, CompareFile, MapOptions, Options};
use graph_ascend_testkit::graph_copies::{copy_nodes, number_list, Graphs};

/// Step 0's rows copied to steps 1 … `steps - 1`, then ranks 0 and 1 copied to ranks 2 …
/// `ranks - 1` (alternately); a few graphs made to agree with golden so that the columns differ.
fn widen(db: &rusqlite::Connection, steps: i64, ranks: i64) {
    for step in 1..steps {
        let (zero, to) = (
            Graphs {
                step: Some(0),
                rank: None,
            },
            Graphs {
                step: Some(step),
                rank: None,
            },
        );
        copy_nodes(db, zero, to, &format!("_s{step}")).expect("copy step");
    }
    for rank in 2..ranks {
        let (from, to) = (
            Graphs {
                step: None,
                rank: Some(rank % 2),
            },
            Graphs {
                step: None,
                rank: Some(rank),
            },
        );
        copy_nodes(db, from, to, &format!("_r{rank}")).expect("copy rank");
    }
    for (step, rank) in [(1, 3), (2, 0), (2, 5), (3, 6)] {
        db.execute(
            "UPDATE tb_nodes AS b SET output_data = n.output_data, input_data = n.input_data \
             FROM tb_nodes AS n WHERE b.data_source = 'Bench' AND n.data_source = 'NPU' \
             AND b.step = ?1 AND n.step = ?1 AND b.rank = ?2 AND n.rank = ?2 \
             AND b.node_name = n.node_name",
            [step, rank],
        )
        .expect("agree");
    }
    db.execute(
        "UPDATE tb_config SET step_list = ?1, rank_list = ?2",
        [number_list(steps), number_list(ranks)],
    )
    .expect("config");
}

fn badness(c: &Cell) -> f64 {
    match c.ratio {
        None => -1.0,
        Some(r) if r.is_nan() => f64::INFINITY,
        Some(r) => r,
    }
}

/// `fine` (one column per rank) aggregated to at most about `max_columns` columns.
fn aggregated(fine: &DivergenceMap, max_columns: usize) -> DivergenceMap {
    let budget = (max_columns / fine.steps.len().max(1)).max(1);
    // Per column of `fine`: its new column.
    let mut new_of = Vec::new();
    let mut columns: Vec<Column> = Vec::new();
    for &step in &fine.steps {
        let of_step: Vec<usize> = (0..fine.columns.len())
            .filter(|&k| fine.columns[k].step == step)
            .collect();
        let per = of_step.len().div_ceil(budget).max(1);
        for run in of_step.chunks(per) {
            let (a, b) = (&fine.columns[run[0]], &fine.columns[run[run.len() - 1]]);
            for _ in run {
                new_of.push(columns.len());
            }
            columns.push(Column {
                step,
                rank_first: a.rank_first,
                rank_last: b.rank_last,
                micro_first: a.micro_first,
                micro_last: b.micro_last,
                width: run.len(),
            });
        }
    }
    let mut m = fine.clone();
    for band in &mut m.bands {
        for row in &mut band.rows {
            let mut cells: Vec<Option<Cell>> = vec![None; columns.len()];
            for (k, cell) in row.cells.iter().enumerate() {
                let Some(cell) = cell else { continue };
                let into = &mut cells[new_of[k]];
                *into = Some(match into.take() {
                    None => cell.clone(),
                    Some(held) => {
                        let (source, source_rank) = if held.source.is_some() {
                            (held.source.clone(), held.source_rank)
                        } else {
                            (cell.source.clone(), cell.source_rank)
                        };
                        let worst = if badness(cell) > badness(&held) {
                            cell.clone()
                        } else {
                            held.clone()
                        };
                        Cell {
                            sources: held.sources + cell.sources,
                            source,
                            source_rank,
                            ..worst
                        }
                    }
                });
            }
            row.cells = cells;
        }
    }
    if let Some(f) = &mut m.first_source {
        f.column = new_of[f.column];
    }
    m.columns = columns;
    m
}

#[test]
fn every_number_of_columns_is_the_full_map_aggregated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = unpack("compare_dist_ranks", dir.path());
    widen(&rusqlite::Connection::open(&path).expect("db"), 4, 7);
    let file = CompareFile::open(&path).expect("open");
    for axis in [ColumnAxis::Ranks, ColumnAxis::MicroBatches] {
        let at = |max_columns: usize| {
            let opts = MapOptions {
                depth: None,
                columns: axis,
                max_columns,
            };
            divergence_map(&file, &Options::default(), &opts)
                .expect("map")
                .1
        };
        let fine = at(1 << 20);
        assert_eq!(
            fine.columns.len(),
            4 * 7,
            "{axis:?}: one column per step and rank"
        );
        assert!(fine.columns.iter().all(|c| c.width == 1));
        let marked = |m: &DivergenceMap| {
            m.bands
                .iter()
                .flat_map(|b| &b.rows)
                .flat_map(|r| r.cells.iter().flatten())
                .map(|c| c.sources)
                .sum::<u32>()
        };
        assert!(marked(&fine) > 0, "the file has sources");
        assert!(fine.first_source.is_some());
        for max_columns in [1, 4, 5, 9, 12, 14, 27, 28, 100] {
            let got = at(max_columns);
            assert_eq!(
                got,
                aggregated(&fine, max_columns),
                "{axis:?}, {max_columns} columns"
            );
            // Source marks survive aggregation.
            assert_eq!(
                marked(&got),
                marked(&fine),
                "{axis:?}, {max_columns} columns"
            );
        }
        // Aggregation changed something: the worst of a run differs from its first rank.
        let narrow = at(4);
        assert_eq!(narrow.columns.len(), 4);
        assert!(narrow
            .bands
            .iter()
            .flat_map(|b| &b.rows)
            .flat_map(|r| r.cells.iter().flatten())
            .any(|c| c.rank != 0));
    }
}
