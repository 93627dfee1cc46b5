//! The bulk writer against the rusqlite one: same rows in, same database out.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rusqlite::types::Value as SqlValue;
use rusqlite::Connection;

use super::format::PAGE_SIZE;
use super::writer::{parse_index, statements};
use super::BulkWriter;
use crate::schema::CREATE_INDEXES;
use crate::writer::{ConfigRow, NodeRow, VisDbWriter, WriteError};

/// xorshift64: deterministic rows without a crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }

    fn text_between(&mut self, min: usize, max: usize) -> String {
        let len = min + self.below((max - min) as u64) as usize;
        self.text(len)
    }

    /// `len` bytes (about) of text mixing ASCII and multi-byte characters.
    fn text(&mut self, len: usize) -> String {
        const PIECES: [&str; 10] = ["a", "Z", "0", " ", "_", "é", "中", "🙂", "\"", "Linear."];
        let mut s = String::with_capacity(len + 8);
        while s.len() < len {
            s.push_str(PIECES[self.below(PIECES.len() as u64) as usize]);
        }
        s
    }
}

/// What one file holds: node batches, stack batches in between, two config calls.
#[derive(Debug)]
pub(super) struct Input {
    pub(super) batches: Vec<Vec<NodeRow>>,
    stacks: Vec<Vec<(String, String)>>,
    configs: [ConfigRow; 2],
}

/// `small` rows of 10 bytes to a few KiB and `big` rows up to 200 KiB, in batches.
pub(super) fn input(seed: u64, small: usize, big: usize) -> Input {
    let mut rng = Rng(seed);
    let parents: Vec<String> = (0..40)
        .map(|i| format!("Module.layer{i}.forward"))
        .collect();
    let mut rows = Vec::with_capacity(small + big);
    let every = (small + big) / big.max(1);
    for i in 0..small + big {
        let is_big = big > 0 && i % every == 7 % every;
        rows.push(node_row(&mut rng, i, &parents, is_big));
    }
    let batches = rows.chunks(997).map(<[NodeRow]>::to_vec).collect();
    let stacks = (0..3)
        .map(|b| {
            (0..300)
                .map(|i| {
                    let id = format!("NPU_0_0_{}", rng.below(400));
                    let info = match (b + i) % 50 {
                        0 => String::new(),
                        1 => rng.text(50_000),
                        _ => rng.text_between(20, 320),
                    };
                    (id, info)
                })
                .collect()
        })
        .collect();
    let config = |graph_type: &str, tool_tip| ConfigRow {
        graph_type: graph_type.into(),
        task: "summary".into(),
        tool_tip,
        micro_steps: 3,
        overflow_check: 1,
        node_colors: "{\"#FFFCF3\": {\"value\": [0, 0.3]}}".into(),
        rank_list: "[0, 1]".into(),
        step_list: "[0]".into(),
    };
    Input {
        batches,
        stacks,
        configs: [config("compare", None), config("build", Some("{}".into()))],
    }
}

fn node_row(rng: &mut Rng, i: usize, parents: &[String], big: bool) -> NodeRow {
    let data = |rng: &mut Rng| {
        if big {
            rng.text_between(30_000, 200_000)
        } else {
            match rng.below(20) {
                0 => String::new(),
                1 => rng.text(3_000),
                _ => rng.text_between(10, 260),
            }
        }
    };
    let name = match rng.below(200) {
        0 => String::new(),
        1 => rng.text(1_500),  // spills from index pages of 4 KiB
        2 => rng.text(12_000), // spills from index pages of 32 KiB
        3..=20 => format!("层.{}", rng.text(6)),
        _ => format!("Functional.linear.{}.forward", rng.below(5_000)),
    };
    NodeRow {
        id: format!("{}_{i}_{}", rng.pick(&["NPU", "Bench", "ä"]), rng.text(4)),
        graph_id: rng.pick(&["NPU_0_0", "Bench_0_0", ""]).into(),
        node_order: match rng.below(50) {
            0 => -(rng.below(1 << 40) as i64),
            1 => (1 << 47) + rng.below(1 << 20) as i64,
            2 => i64::MAX - rng.below(3) as i64,
            3 => i64::MIN + rng.below(3) as i64,
            _ => (i as i64) / 2,
        },
        node_name: name,
        node_type: rng.pick(&["0", "1", "5"]).into(),
        up_node: if rng.below(30) == 0 {
            String::new()
        } else {
            parents[rng.below(parents.len() as u64) as usize].clone()
        },
        sub_nodes: rng.pick(&["", "[]", "[\"a\", \"b\"]"]).into(),
        precision_index: [
            None,
            Some(0.0),
            Some(0.5),
            Some(1.0),
            Some(-0.0),
            Some(0.25),
        ][rng.below(6) as usize],
        overflow_level: match rng.below(3) {
            0 => None,
            1 => Some(String::new()),
            _ => Some("medium".into()),
        },
        micro_step_id: rng.below(3) as i64,
        matched_node_link: match rng.below(10) {
            0 => rng.text(1_200),
            1..=4 => "[]".into(),
            _ => format!("[\"{}\"]", rng.pick(&["x", "y", "中"])),
        },
        stack_id: format!("NPU_0_0_{}", rng.below(400)),
        parallel_merge_info: rng.pick(&["", "{}"]).into(),
        matched_distributed: "{}".into(),
        modified: rng.below(2) as i64,
        input_data: data(rng),
        output_data: data(rng),
        data_source: rng.pick(&["NPU", "Bench", ""]).into(),
        dump_data_dir: (rng.below(3) == 0).then(|| rng.text(30)),
        step: rng.below(2) as i64,
        rank: rng.below(3) as i64,
        is_distributed: [0, 1, 300, -70_000][rng.below(4) as usize],
    }
}

pub(super) trait Sink {
    fn nodes(&mut self, rows: &[NodeRow]) -> Result<(), WriteError>;
    fn stacks(&mut self, rows: &[(String, String)]) -> Result<(), WriteError>;
    fn config(&mut self, c: &ConfigRow) -> Result<(), WriteError>;
}

impl Sink for VisDbWriter {
    fn nodes(&mut self, rows: &[NodeRow]) -> Result<(), WriteError> {
        self.insert_nodes(rows)
    }
    fn stacks(&mut self, rows: &[(String, String)]) -> Result<(), WriteError> {
        self.insert_stacks(rows.iter().map(|(a, b)| (a.as_str(), b.as_str())))
    }
    fn config(&mut self, c: &ConfigRow) -> Result<(), WriteError> {
        self.insert_config(c)
    }
}

impl Sink for BulkWriter {
    fn nodes(&mut self, rows: &[NodeRow]) -> Result<(), WriteError> {
        self.insert_nodes(rows)
    }
    fn stacks(&mut self, rows: &[(String, String)]) -> Result<(), WriteError> {
        self.insert_stacks(rows.iter().map(|(a, b)| (a.as_str(), b.as_str())))
    }
    fn config(&mut self, c: &ConfigRow) -> Result<(), WriteError> {
        self.insert_config(c)
    }
}

/// Feeds `input` in the same interleaving to either writer.
pub(super) fn feed(sink: &mut impl Sink, input: &Input) {
    let third = input.batches.len() / 3;
    for (i, batch) in input.batches.iter().enumerate() {
        if third > 0 && i % third == 1 {
            if let Some(s) = input.stacks.get(i / third) {
                sink.stacks(s).unwrap();
            }
        }
        if i == 1 {
            sink.config(&input.configs[0]).unwrap();
        }
        sink.nodes(batch).unwrap();
    }
    for s in &input.stacks {
        sink.stacks(s).unwrap();
    }
    sink.config(&input.configs[1]).unwrap();
}

/// Writes `input` with both writers into `dir`: (rusqlite file, bulk file).
fn write_both(dir: &Path, input: &Input, page_size: usize) -> (PathBuf, PathBuf) {
    let (sql, bulk, _) = write_both_spilling(dir, input, page_size, None);
    (sql, bulk)
}

/// [`write_both`], the bulk writer keeping at most `index_budget` bytes of index entries in
/// memory (spilling sorted runs past it) when given; also returns the runs of `tb_nodes`' first
/// index.
fn write_both_spilling(
    dir: &Path,
    input: &Input,
    page_size: usize,
    index_budget: Option<usize>,
) -> (PathBuf, PathBuf, usize) {
    let sql_dest = dir.join("sqlite.vis.db");
    let mut w = VisDbWriter::create(&sql_dest).unwrap();
    feed(&mut w, input);
    w.finish().unwrap();
    let bulk_dest = dir.join("bulk.vis.db");
    let mut b = BulkWriter::with_page_size(&bulk_dest, page_size).unwrap();
    if let Some(budget) = index_budget {
        b.set_index_budget(budget);
    }
    feed(&mut b, input);
    let runs = b.spilled().map_or(0, |s| s.runs(0));
    let bulk_dest = b.finish().unwrap();
    // Only the two databases are left: no temporary file, runs or otherwise.
    assert_eq!(std::fs::read_dir(dir).unwrap().count(), 2, "{runs} runs");
    (sql_dest, bulk_dest, runs)
}

fn rows(conn: &Connection, sql: &str, params: &[&dyn rusqlite::ToSql]) -> Vec<Vec<SqlValue>> {
    let mut stmt = conn.prepare(sql).unwrap();
    let n = stmt.column_count();
    let params = &params[..stmt.parameter_count()];
    stmt.query_map(params, |r| (0..n).map(|i| r.get(i)).collect())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn integrity(conn: &Connection) -> Vec<String> {
    let mut stmt = conn.prepare("PRAGMA integrity_check").unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// `typeof()` of every column of `table`, row by row (the columns as SQLite lists them).
fn typeof_query(conn: &Connection, table: &str) -> String {
    let mut stmt = conn
        .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
        .unwrap();
    let cols: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(!cols.is_empty(), "{table} has columns");
    let list: Vec<String> = cols.iter().map(|c| format!("typeof({c})")).collect();
    format!("SELECT {} FROM {table} ORDER BY rowid", list.join(", "))
}

/// The two files hold the same schema, rows, types and index contents.
pub(super) fn assert_same(sql: &Connection, bulk: &Connection) {
    assert_eq!(integrity(bulk), ["ok"]);
    let same = |q: &str, params: &[&dyn rusqlite::ToSql]| {
        let (a, b) = (rows(sql, q, params), rows(bulk, q, params));
        assert_eq!(a.len(), b.len(), "{q}: row count");
        assert!(a == b, "{q}: rows differ");
        a
    };
    same(
        "SELECT rowid, type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid",
        &[],
    );
    same("SELECT rowid, * FROM tb_nodes ORDER BY rowid", &[]);
    same(&typeof_query(sql, "tb_nodes"), &[]);
    same("SELECT rowid, * FROM tb_stack ORDER BY rowid", &[]);
    same(&typeof_query(sql, "tb_stack"), &[]);
    same("SELECT rowid, * FROM tb_config ORDER BY rowid", &[]);
    same(&typeof_query(sql, "tb_config"), &[]);
    for stmt in statements(CREATE_INDEXES) {
        let (name, table, cols) = parse_index(stmt).unwrap();
        let cols = cols.join(", ");
        same(
            &format!("SELECT {cols}, rowid FROM {table} INDEXED BY {name} ORDER BY {cols}, rowid"),
            &[],
        );
    }
    for (table, key) in [("tb_nodes", "id"), ("tb_stack", "id"), ("tb_config", "id")] {
        same(
            &format!(
                "SELECT {key}, rowid FROM {table} INDEXED BY sqlite_autoindex_{table}_1 \
                 ORDER BY {key}"
            ),
            &[],
        );
    }
}

/// Point queries through each index, on values taken from the file.
pub(super) fn assert_same_lookups(sql: &Connection, bulk: &Connection) {
    let sample = rows(
        sql,
        "SELECT id, up_node, node_name, matched_node_link, step, rank, data_source \
         FROM tb_nodes WHERE rowid % 97 = 3",
        &[],
    );
    assert!(!sample.is_empty());
    let queries = [
        "SELECT node_name FROM tb_nodes INDEXED BY index1 WHERE step=?5 AND rank=?6 \
         AND data_source=?7 AND up_node=?2 ORDER BY node_order",
        "SELECT rowid FROM tb_nodes INDEXED BY index2 WHERE step=?5 AND rank=?6 \
         AND data_source=?7 AND node_name=?3",
        "SELECT node_order FROM tb_nodes INDEXED BY index3 WHERE step=?5 AND rank=?6 \
         AND data_source=?7 ORDER BY node_order LIMIT 50",
        "SELECT node_order FROM tb_nodes INDEXED BY index4 WHERE step=?5 AND rank=?6 \
         ORDER BY node_order LIMIT 50",
        "SELECT rowid FROM tb_nodes INDEXED BY index5 WHERE step=?5 AND rank=?6 \
         AND micro_step_id=1 ORDER BY node_order LIMIT 50",
        "SELECT rowid FROM tb_nodes INDEXED BY index6 WHERE step=?5 AND rank=?6 \
         AND modified=1 AND matched_node_link=?4",
        "SELECT count(*) FROM tb_nodes INDEXED BY index7 WHERE is_distributed=1",
        "SELECT rowid, node_name FROM tb_nodes INDEXED BY sqlite_autoindex_tb_nodes_1 \
         WHERE id=?1",
    ];
    for s in &sample {
        let p: Vec<&dyn rusqlite::ToSql> = s.iter().map(|v| v as &dyn rusqlite::ToSql).collect();
        for q in queries {
            let (a, b) = (rows(sql, q, &p), rows(bulk, q, &p));
            assert!(a == b, "{q} with {s:?}");
        }
        let found = rows(bulk, queries[7], &p);
        assert_eq!(found.len(), 1, "id lookup finds its row");
    }
}

/// Levels of the b-tree rooted at `root`, following right-most children.
pub(super) fn depth(file: &[u8], page_size: usize, root: u32) -> usize {
    let mut page = root as usize;
    let mut levels = 1;
    loop {
        let start = (page - 1) * page_size + if page == 1 { 100 } else { 0 };
        match file[start] {
            0x02 | 0x05 => {
                let right = &file[start + 8..start + 12];
                page = u32::from_be_bytes(right.try_into().unwrap()) as usize;
                levels += 1;
            }
            0x0A | 0x0D => return levels,
            t => panic!("page {page}: type {t:#x}"),
        }
    }
}

pub(super) fn root_of(conn: &Connection, name: &str) -> u32 {
    conn.query_row(
        "SELECT rootpage FROM sqlite_master WHERE name = ?1",
        [name],
        |r| r.get(0),
    )
    .unwrap()
}

fn check_python(path: &Path, expected_rows: i64) {
    let script = "import sqlite3, sys\n\
                  c = sqlite3.connect(sys.argv[1])\n\
                  print(c.execute('PRAGMA integrity_check').fetchone()[0], \
                  c.execute('SELECT count(*) FROM tb_nodes').fetchone()[0])";
    match std::process::Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(text.trim(), format!("ok {expected_rows}"));
        }
        Err(e) => eprintln!("python3 not available ({e}): skipping the Python check"),
    }
}

#[test]
fn same_database_as_sqlite_at_32k_pages() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(0x2545_F491_4F6C_DD1D, 60_000, 40);
    let (sql_path, bulk_path) = write_both(dir.path(), &input, PAGE_SIZE);
    let (sql, bulk) = (
        Connection::open(&sql_path).unwrap(),
        Connection::open(&bulk_path).unwrap(),
    );
    assert_same(&sql, &bulk);
    assert_same_lookups(&sql, &bulk);
    let file = std::fs::read(&bulk_path).unwrap();
    assert!(depth(&file, PAGE_SIZE, root_of(&bulk, "tb_nodes")) >= 2);
    assert!(depth(&file, PAGE_SIZE, root_of(&bulk, "index1")) >= 2);
    let count: i64 = bulk
        .query_row("SELECT count(*) FROM tb_nodes", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 60_040);
    check_python(&bulk_path, count);
}

#[test]
fn deep_trees_with_small_pages() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(0x9E37_79B9_7F4A_7C15, 25_000, 20);
    let (sql_path, bulk_path) = write_both(dir.path(), &input, 4_096);
    let (sql, bulk) = (
        Connection::open(&sql_path).unwrap(),
        Connection::open(&bulk_path).unwrap(),
    );
    let page_size: i64 = bulk
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap();
    assert_eq!(page_size, 4_096);
    assert_same(&sql, &bulk);
    assert_same_lookups(&sql, &bulk);
    let file = std::fs::read(&bulk_path).unwrap();
    assert!(depth(&file, 4_096, root_of(&bulk, "tb_nodes")) >= 3);
    for index in ["index1", "index6"] {
        assert!(depth(&file, 4_096, root_of(&bulk, index)) >= 3, "{index}");
    }
}

#[test]
fn every_page_size_from_4k_to_64k() {
    let input = input(0x1234_5678, 3_000, 6);
    for page_size in [4_096, 8_192, 16_384, 65_536] {
        let dir = tempfile::tempdir().unwrap();
        let (sql_path, bulk_path) = write_both(dir.path(), &input, page_size);
        let (sql, bulk) = (
            Connection::open(&sql_path).unwrap(),
            Connection::open(&bulk_path).unwrap(),
        );
        let stored: i64 = bulk
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        assert_eq!(stored as usize, page_size);
        assert_same(&sql, &bulk);
    }
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("empty64k.vis.db");
    BulkWriter::with_page_size(&dest, 65_536)
        .unwrap()
        .finish()
        .unwrap();
    assert_eq!(integrity(&Connection::open(&dest).unwrap()), ["ok"]);
}

#[test]
fn writer_moves_between_threads() {
    fn send<T: Send>() {}
    send::<BulkWriter>();
}

#[test]
fn header_fields_are_sqlites() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(7, 500, 1);
    let (_, bulk_path) = write_both(dir.path(), &input, PAGE_SIZE);
    let file = std::fs::read(&bulk_path).unwrap();
    let be32 = |at: usize| u32::from_be_bytes(file[at..at + 4].try_into().unwrap());
    assert_eq!(&file[..16], b"SQLite format 3\0");
    assert_eq!(&file[16..24], &[0x80, 0x00, 1, 1, 0, 64, 32, 32]);
    assert_eq!(be32(28) as usize * PAGE_SIZE, file.len(), "page count");
    assert_eq!(be32(24), be32(92), "change counter valid");
    assert_eq!((be32(32), be32(36)), (0, 0), "no free pages");
    assert_eq!((be32(44), be32(52), be32(56)), (4, 0, 1));
    let conn = Connection::open(&bulk_path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let m = std::fs::metadata(&bulk_path).unwrap().permissions().mode();
        assert_eq!(m & 0o777, 0o644);
    }
}

#[test]
fn empty_file_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let sql_dest = dir.path().join("sqlite.vis.db");
    VisDbWriter::create(&sql_dest).unwrap().finish().unwrap();
    let bulk_dest = dir.path().join("bulk.vis.db");
    BulkWriter::create(&bulk_dest).unwrap().finish().unwrap();
    let (sql, bulk) = (
        Connection::open(&sql_dest).unwrap(),
        Connection::open(&bulk_dest).unwrap(),
    );
    assert_same(&sql, &bulk);
    let pages: i64 = bulk
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap();
    assert_eq!(pages, 15, "page 1 and one empty root per table and index");
    check_python(&bulk_dest, 0);
}

/// The same edits on both files keep them equal, and SQLite finds nothing wrong with ours.
#[test]
fn sqlite_can_keep_writing_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = input(0xDEAD_BEEF, 8_000, 10);
    let (sql_path, bulk_path) = write_both(dir.path(), &input, PAGE_SIZE);
    let (sql, bulk) = (
        Connection::open(&sql_path).unwrap(),
        Connection::open(&bulk_path).unwrap(),
    );
    let edits = "
        UPDATE tb_nodes SET up_node = 'moved', step = step + 1, node_order = -node_order,
            input_data = input_data || printf('%.*c', 40000, 'x')
            WHERE rowid % 7 = 0;
        UPDATE tb_nodes SET matched_node_link = '[\"z\"]', modified = 1 WHERE rowid % 5 = 0;
        INSERT INTO tb_nodes (id, graph_id, node_order, node_name, node_type, micro_step_id,
            modified, step, rank, data_source, input_data)
            SELECT 'new_' || rowid, 'g', rowid, 'n' || rowid, '1', 0, 0, 9, 9, 'NPU',
                printf('%.*c', rowid % 3 * 30000, 'y')
            FROM tb_nodes WHERE rowid % 13 = 0;
        DELETE FROM tb_nodes WHERE rowid % 11 = 0;
        INSERT OR IGNORE INTO tb_stack VALUES ('extra', 'info');
        DELETE FROM tb_stack WHERE rowid % 2 = 0;
    ";
    sql.execute_batch(edits).unwrap();
    bulk.execute_batch(edits).unwrap();
    assert_same(&sql, &bulk);
    bulk.execute_batch("VACUUM").unwrap();
    assert_eq!(integrity(&bulk), ["ok"]);
}

#[test]
fn duplicate_id_fails_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("dup.vis.db");
    let row = |id: &str| NodeRow {
        id: id.into(),
        ..Default::default()
    };
    let mut w = BulkWriter::create(&dest).unwrap();
    w.insert_nodes(&[row("a"), row("b"), row("c")]).unwrap();
    w.insert_nodes(&[row("d"), row("b")]).unwrap();
    let err = w.finish().unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("dup.vis.db") && message.contains("\"b\""),
        "{message}"
    );
    match err {
        WriteError::Duplicate { path, id } => {
            assert_eq!(path, dest);
            assert_eq!(id, "b");
        }
        other => panic!("expected a duplicate error, got {other:?}"),
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Memory flat in the rows: index entries past the budget are spilled as sorted runs and merged at the end.
/// However many runs (one per batch here; one and a remainder; a single row), the database is
/// SQLite's, deep trees and spilling keys included.
#[test]
fn spilled_indexes_make_the_same_database() {
    let input = input(0x5EED_0016, 25_000, 8);
    let batches = input.batches.len();
    for (page_size, budget, runs) in [
        (4_096, 0, batches),
        (PAGE_SIZE, 0, batches),
        (4_096, 7 << 20, 2),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (sql_path, bulk_path, spilled) =
            write_both_spilling(dir.path(), &input, page_size, Some(budget));
        assert_eq!(spilled, runs, "budget {budget}");
        let (sql, bulk) = (
            Connection::open(&sql_path).unwrap(),
            Connection::open(&bulk_path).unwrap(),
        );
        assert_same(&sql, &bulk);
        assert_same_lookups(&sql, &bulk);
        if page_size == 4_096 {
            let file = std::fs::read(&bulk_path).unwrap();
            for index in ["index1", "index6"] {
                assert!(depth(&file, 4_096, root_of(&bulk, index)) >= 3, "{index}");
            }
        }
    }
    let single = Input {
        batches: vec![input.batches[0][..1].to_vec()],
        stacks: Vec::new(),
        configs: input.configs.clone(),
    };
    let dir = tempfile::tempdir().unwrap();
    let (sql_path, bulk_path, runs) = write_both_spilling(dir.path(), &single, 4_096, Some(0));
    assert_eq!(runs, 1);
    let (sql, bulk) = (
        Connection::open(&sql_path).unwrap(),
        Connection::open(&bulk_path).unwrap(),
    );
    assert_same(&sql, &bulk);
}

/// A repeated id whose two rows are in different runs (and one within a run) fails at the
/// end as it does unspilled: the same error, naming the file and the id, and nothing left.
#[test]
fn duplicate_id_across_runs_fails_and_leaves_nothing() {
    let row = |id: &str| NodeRow {
        id: id.into(),
        ..Default::default()
    };
    for (batches, dup) in [
        (vec![vec!["a", "b"], vec!["c"], vec!["d", "b"]], "b"),
        (vec![vec!["x", "z"], vec!["y", "y"]], "y"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("dup.vis.db");
        let mut w = BulkWriter::create(&dest).unwrap();
        w.set_index_budget(0);
        for batch in batches {
            let rows: Vec<NodeRow> = batch.into_iter().map(row).collect();
            w.insert_nodes(&rows).unwrap();
        }
        assert!(w.spilled().is_some_and(|s| s.runs(0) >= 2));
        match w.finish().unwrap_err() {
            WriteError::Duplicate { path, id } => {
                assert_eq!(path, dest);
                assert_eq!(id, dup);
            }
            other => panic!("expected a duplicate error, got {other:?}"),
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}

/// A writer dropped (a cancelled conversion) after spilling removes its runs too.
#[test]
fn dropped_spilling_writer_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = BulkWriter::create(&dir.path().join("x.vis.db")).unwrap();
    w.set_index_budget(0);
    w.insert_nodes(&[NodeRow::default()]).unwrap();
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let tag = format!(".graph-ascend-{}.", crate::stale::owner_tag());
    assert!(
        names
            .iter()
            .any(|n| n.starts_with(&tag) && n.ends_with(".index.tmp")),
        "{names:?}"
    );
    drop(w);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn dropped_writer_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("x.vis.db");
    let mut w = BulkWriter::create(&dest).unwrap();
    w.insert_nodes(&[NodeRow::default()]).unwrap();
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "temporary"
    );
    assert!(!dest.exists(), "nothing visible before finish");
    drop(w);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn first_stack_and_config_win() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("s.vis.db");
    let mut w = BulkWriter::create(&dest).unwrap();
    w.insert_stacks([("s1", "first"), ("s2", "x"), ("s1", "second")])
        .unwrap();
    w.insert_stacks([("s2", "again")]).unwrap();
    let config = |t: &str| ConfigRow {
        graph_type: t.into(),
        ..Default::default()
    };
    w.insert_config(&config("build")).unwrap();
    w.insert_config(&config("compare")).unwrap();
    let conn = Connection::open(w.finish().unwrap()).unwrap();
    let stacks = rows(&conn, "SELECT rowid, id, stack_info FROM tb_stack", &[]);
    let text = |s: &str| SqlValue::Text(s.into());
    assert_eq!(
        stacks,
        [
            vec![SqlValue::Integer(1), text("s1"), text("first")],
            vec![SqlValue::Integer(2), text("s2"), text("x")],
        ]
    );
    let t: String = conn
        .query_row("SELECT graph_type FROM tb_config WHERE id = '1'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(t, "build");
}

/// ~50k rows of ~1.8 KiB (91 MB, like a real conversion) through both writers:
/// `cargo test --release -p graph-ascend-visdb -- --ignored --nocapture bulk_vs_sqlite_timing`
#[test]
#[ignore]
fn bulk_vs_sqlite_timing() {
    let mut rng = Rng(42);
    let parents: Vec<String> = (0..500)
        .map(|i| format!("Module.layers.{i}.forward"))
        .collect();
    let rows: Vec<NodeRow> = (0..50_000)
        .map(|i| {
            let mut r = node_row(&mut rng, i, &parents, false);
            r.node_name = format!("Functional.linear.{i}.forward");
            r.matched_node_link = format!("[\"{}\"]", r.node_name);
            r.input_data = rng.text(900);
            r.output_data = rng.text(700);
            r
        })
        .collect();
    let bytes: usize = rows
        .iter()
        .map(|r| r.input_data.len() + r.output_data.len() + r.node_name.len() + 100)
        .sum();
    let dir = tempfile::tempdir().unwrap();
    let time = |name: &str, f: &dyn Fn(&Path)| {
        let dest = dir.path().join(name);
        let start = Instant::now();
        f(&dest);
        let elapsed = start.elapsed();
        let size = std::fs::metadata(&dest).unwrap().len();
        println!("{name}: {elapsed:.3?}, {:.1} MB", size as f64 / 1e6);
        elapsed
    };
    let chunks = || rows.chunks(1_000);
    let sqlite = time("sqlite.vis.db", &|dest| {
        let mut w = VisDbWriter::create(dest).unwrap();
        for c in chunks() {
            w.insert_nodes(c).unwrap();
        }
        w.finish().unwrap();
    });
    let bulk = time("bulk.vis.db", &|dest| {
        let mut w = BulkWriter::create(dest).unwrap();
        for c in chunks() {
            w.insert_nodes(c).unwrap();
        }
        w.finish().unwrap();
    });
    println!(
        "{} rows, ~{:.1} MB of row data: bulk is {:.1}x faster",
        rows.len(),
        bytes as f64 / 1e6,
        sqlite.as_secs_f64() / bulk.as_secs_f64()
    );
    let conn = Connection::open(dir.path().join("bulk.vis.db")).unwrap();
    assert_eq!(integrity(&conn), ["ok"]);
}

/// Property test (robustness, "keep it that way"): any rows, written through the bulk writer and
/// through rusqlite, read back the same from SQLite (rows, stored types, every index, integrity).
/// proptest shrinks a failing case to a minimal one.
mod property {
    use proptest::prelude::*;

    use super::*;

    /// Text of any characters (NUL, surrogate-free Unicode), short or spilling into overflow
    /// pages at 4 KiB.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => ".{0,12}",
            2 => "[a-z.]{0,40}",
            1 => proptest::collection::vec(any::<char>(), 0..3000)
                .prop_map(|c| c.into_iter().collect::<String>()),
            1 => (0usize..6000).prop_map(|n| "x".repeat(n)),
        ]
    }

    fn real() -> impl Strategy<Value = Option<f64>> {
        prop_oneof![
            Just(None),
            any::<f64>().prop_map(Some),
            prop_oneof![Just(0.0), Just(-0.0), Just(0.5), Just(1.0), Just(3.0e15)].prop_map(Some),
        ]
    }

    prop_compose! {
        fn node_row()(
            graph_id in text(), node_order in any::<i64>(), node_name in text(),
            node_type in text(), up_node in text(), sub_nodes in text(),
            precision_index in real(), overflow_level in proptest::option::of(text()),
            micro_step_id in any::<i64>(), matched_node_link in text(), stack_id in text(),
            parallel_merge_info in text(), matched_distributed in text(), modified in any::<i64>(),
            input_data in text(), output_data in text(), data_source in text(),
            dump_data_dir in proptest::option::of(text()), step in any::<i64>(),
            rank in any::<i64>(), is_distributed in any::<i64>(), id in text(),
        ) -> NodeRow {
            NodeRow {
                id, graph_id, node_order, node_name, node_type, up_node, sub_nodes,
                precision_index, overflow_level, micro_step_id, matched_node_link, stack_id,
                parallel_merge_info, matched_distributed, modified, input_data, output_data,
                data_source, dump_data_dir, step, rank, is_distributed,
            }
        }
    }

    prop_compose! {
        fn config()(
            graph_type in text(), task in text(), tool_tip in proptest::option::of(text()),
            micro_steps in any::<i64>(), overflow_check in any::<i64>(), node_colors in text(),
            rank_list in text(), step_list in text(),
        ) -> ConfigRow {
            ConfigRow {
                graph_type, task, tool_tip, micro_steps, overflow_check, node_colors, rank_list,
                step_list,
            }
        }
    }

    prop_compose! {
        /// Rows with unique ids (the key is a primary key: duplicates are their own test), in
        /// batches, with stacks and configs.
        fn any_input()(
            rows in proptest::collection::vec(node_row(), 0..60),
            cut in 1usize..8,
            stacks in proptest::collection::vec((text(), text()), 0..20),
            configs in (config(), config()),
        ) -> Input {
            let mut seen = std::collections::HashSet::new();
            let rows: Vec<NodeRow> = rows
                .into_iter()
                .enumerate()
                .map(|(i, mut r)| {
                    if !seen.insert(r.id.clone()) {
                        r.id = format!("{}#{i}", r.id);
                        seen.insert(r.id.clone());
                    }
                    r
                })
                .collect();
            let mut stack_ids = std::collections::HashSet::new();
            let stacks: Vec<(String, String)> = stacks
                .into_iter()
                .filter(|(id, _)| stack_ids.insert(id.clone()))
                .collect();
            Input {
                batches: rows.chunks(cut).map(<[NodeRow]>::to_vec).collect(),
                stacks: vec![stacks],
                configs: [configs.0, configs.1],
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn bulk_and_sqlite_read_back_the_same(input in any_input(), spill in any::<bool>()) {
            let dir = tempfile::tempdir().unwrap();
            let (sql, bulk, _) = write_both_spilling(dir.path(), &input, 4_096, spill.then_some(0));
            let (sql, bulk) = (Connection::open(sql).unwrap(), Connection::open(bulk).unwrap());
            assert_same(&sql, &bulk);
        }
    }
}

/// Indexes given already sorted ([`BulkWriter::create_sorted`]).
mod given_sorted {
    use rusqlite::types::Value as SqlValue;
    use rusqlite::Connection;

    use super::{assert_same, assert_same_lookups, depth, feed, input, root_of};
    use crate::bulk::{BulkWriter, NodeIndexSpec, Value};
    use crate::writer::WriteError;

    /// Each index of `from`, in index order, as `(values, rowid)`.
    fn entries(from: &Connection, spec: &NodeIndexSpec) -> Vec<(Vec<SqlValue>, i64)> {
        let cols = spec.columns.join(", ");
        let mut stmt = from
            .prepare(&format!(
                "SELECT {cols}, rowid FROM tb_nodes INDEXED BY {} ORDER BY {cols}, rowid",
                spec.name
            ))
            .unwrap();
        let n = spec.columns.len();
        stmt.query_map([], |r| {
            let values = (0..n).map(|i| r.get(i)).collect::<Result<_, _>>()?;
            Ok((values, r.get(n)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    }

    /// The same rows written with indexes sorted in memory and with indexes given sorted (here
    /// read back from the first file): the same database, down to deep trees of small pages
    /// with spilling keys.
    #[test]
    fn sorted_indexes_make_the_same_database() {
        let dir = tempfile::tempdir().unwrap();
        let input = input(0x5EED_50B7, 25_000, 5);
        let reference = dir.path().join("reference.vis.db");
        let mut w = BulkWriter::with_page_size(&reference, 4_096).unwrap();
        feed(&mut w, &input);
        w.finish().unwrap();
        let reference = Connection::open(&reference).unwrap();
        let dest = dir.path().join("sorted.vis.db");
        let mut w = BulkWriter::sorted_with_page_size(&dest, 4_096).unwrap();
        feed(&mut w, &input);
        for spec in w.sorted_node_indexes() {
            let mut ix = w.begin_sorted(&spec);
            for (values, rowid) in entries(&reference, &spec) {
                let values: Option<Vec<Value<'_>>> = values.iter().map(Value::from_sql).collect();
                let values = values.expect("no blob in tb_nodes");
                w.push_sorted(&mut ix, &values, rowid).unwrap();
            }
            w.end_sorted(ix).unwrap();
        }
        let dest = w.finish().unwrap();
        let sorted = Connection::open(&dest).unwrap();
        assert_same(&reference, &sorted);
        assert_same_lookups(&reference, &sorted);
        let file = std::fs::read(&dest).unwrap();
        for index in ["index1", "index6"] {
            assert!(depth(&file, 4_096, root_of(&sorted, index)) >= 3, "{index}");
        }
    }

    /// Entries out of order, a repeated key of a UNIQUE index, a missing index: refused, and
    /// nothing is left behind.
    #[test]
    fn unsorted_duplicate_or_missing_entries_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let input = input(7, 50, 0);
        let rows: usize = input.batches.iter().map(Vec::len).sum();
        let attempt = |entry: &dyn Fn(usize) -> (String, i64)| {
            let dest = dir.path().join("x.vis.db");
            let mut w = BulkWriter::create_sorted(&dest).unwrap();
            feed(&mut w, &input);
            let specs = w.sorted_node_indexes();
            let mut ix = w.begin_sorted(&specs[0]);
            for i in 0..rows {
                let (id, rowid) = entry(i);
                w.push_sorted(&mut ix, &[Value::Text(&id)], rowid)?;
            }
            w.end_sorted(ix)?;
            w.finish()
        };
        let e = attempt(&|i| (format!("{:04}", rows - i), i as i64 + 1)).unwrap_err();
        assert!(e.to_string().contains("out of order"), "{e}");
        let e = attempt(&|i| (format!("{:04}", i / 2), i as i64 + 1)).unwrap_err();
        assert!(matches!(e, WriteError::Duplicate { .. }), "{e}");
        let e = attempt(&|i| (format!("{i:04}"), i as i64 + 1)).unwrap_err();
        assert!(
            e.to_string().contains("was not given its sorted entries"),
            "{e}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
