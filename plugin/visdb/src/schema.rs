//! msprobe 26.2's `.vis.db` schema, exactly as its writer creates it
//! (`docs/visdb.md`; real files in `tests/fixtures/upstream_vis/`).
//!
//! Files we write must open in msprobe's plugin, so tables, column order, types and index names
//! are kept byte for byte; the additions are ours alone, which no other reader names: an index,
//! [`NODE_LIST_INDEX`], and a table with its index, [`DIAGNOSIS_TABLE`].

/// Defines `tb_nodes` from one list of its columns (name, then type and constraints, in
/// msprobe's order): the `CREATE TABLE` statements ([`CREATE_TABLES`], byte for byte msprobe's),
/// the column names ([`NODE_COLUMNS`]) and the insert of a whole row ([`INSERT_NODE_SQL`]).
macro_rules! tb_nodes {
    (
        columns { $first:ident $first_decl:literal $(, $name:ident $decl:literal)* $(,)? }
        other_tables $other_tables:literal
    ) => {
        /// `CREATE TABLE` statements, in msprobe's order.
        pub const CREATE_TABLES: &str = concat!(
            "\nCREATE TABLE tb_nodes (\n    ",
            stringify!($first), " ", $first_decl,
            $(",\n    ", stringify!($name), " ", $decl,)*
            "\n);\n",
            $other_tables
        );

        /// Columns of `tb_nodes` in msprobe's insert order.
        pub const NODE_COLUMNS: [&str; [stringify!($first) $(, stringify!($name))*].len()] =
            [stringify!($first) $(, stringify!($name))*];

        /// Inserts one `tb_nodes` row, its values in [`NODE_COLUMNS`] order (`?` each).
        pub const INSERT_NODE_SQL: &str = concat!(
            "INSERT INTO tb_nodes (",
            stringify!($first) $(, ", ", stringify!($name))*,
            ") VALUES (?",
            $(placeholder!($name),)*
            ")"
        );
    };
}

/// One more `?` of [`INSERT_NODE_SQL`], for each column after the first.
macro_rules! placeholder {
    ($column:ident) => {
        ", ?"
    };
}

tb_nodes! {
    columns {
        id "TEXT PRIMARY KEY",
        graph_id "TEXT NOT NULL",
        node_order "INTEGER NOT NULL",
        node_name "TEXT NOT NULL",
        node_type "TEXT NOT NULL",
        up_node "TEXT",
        sub_nodes "TEXT",
        precision_index "INTEGER",
        overflow_level "TEXT",
        micro_step_id "INTEGER NOT NULL",
        matched_node_link "TEXT",
        stack_id "TEXT",
        parallel_merge_info "TEXT",
        matched_distributed "TEXT",
        modified "INTEGER NOT NULL",
        input_data "TEXT",
        output_data "TEXT",
        data_source "TEXT",
        dump_data_dir "TEXT",
        step "INTEGER NOT NULL",
        rank "INTEGER NOT NULL",
        is_distributed "INTEGER",
    }
    other_tables "CREATE TABLE tb_stack (
    id TEXT PRIMARY KEY,
    stack_info TEXT
);
CREATE TABLE tb_config (
    id TEXT PRIMARY KEY,
    graph_type TEXT NOT NULL,
    task TEXT,
    tool_tip TEXT,
    micro_steps INTEGER,
    overflow_check INTEGER,
    node_colors TEXT NOT NULL,
    rank_list TEXT NOT NULL,
    step_list TEXT NOT NULL
);
"
}

/// "The node is a leaf", in SQL: 1 when `sub_nodes` is empty, NULL or `[]`, else 0 (msprobe's
/// test, spelled once; a macro so that the store's queries can `concat!` it).
macro_rules! is_leaf_sql {
    () => {
        "(sub_nodes = '' OR sub_nodes IS NULL OR sub_nodes = '[]')"
    };
}
pub(crate) use is_leaf_sql;

/// The name of our own index, as a literal for `concat!`: see [`NODE_LIST_INDEX`].
macro_rules! node_list_index {
    () => {
        "ga_node_list"
    };
}

/// Our own index, beside msprobe's seven (the last statement of [`CREATE_INDEXES`]).
///
/// It holds, per graph in node order, every column the service's pass over a whole graph reads
/// (`Store::scan_index_rows`: names, `sub_nodes` for "is a leaf", micro step, precision, match),
/// so that SQLite answers that pass from the index alone (a covering index) instead of from every
/// row, whose pages the rows share with their input and output statistics (`docs/visdb.md` §2).
/// Plain columns only, no expression: any SQLite opens the file. SQLite keeps it up to date
/// through any change to `tb_nodes`, ours or another tool's (msprobe's plugin edits matches in
/// place). Files without it (msprobe's) are read through `index3` and the rows, with the same
/// results.
pub const NODE_LIST_INDEX: &str = node_list_index!();

/// The indexes of a file we write, created once all rows are in: msprobe's seven
/// (`add_table_index`), then [`NODE_LIST_INDEX`].
pub const CREATE_INDEXES: &str = concat!(
    "
CREATE INDEX index1 ON tb_nodes (step, rank, data_source, up_node, node_order);
CREATE INDEX index2 ON tb_nodes (step, rank, data_source, node_name);
CREATE INDEX index3 ON tb_nodes (step, rank, data_source, node_order);
CREATE INDEX index4 ON tb_nodes (step, rank, node_order);
CREATE INDEX index5 ON tb_nodes (step, rank, micro_step_id, node_order);
CREATE INDEX index6 ON tb_nodes (step, rank, modified, matched_node_link);
CREATE INDEX index7 ON tb_nodes (is_distributed);
CREATE INDEX ",
    node_list_index!(),
    " ON tb_nodes (step, rank, data_source, node_order, node_name, sub_nodes, micro_step_id, \
precision_index, matched_node_link);
"
);

/// The name of our own table of what the diagnosis reads, as a literal for `concat!`: see
/// [`DIAGNOSIS_TABLE`].
macro_rules! diagnosis_table {
    () => {
        "ga_diagnosis"
    };
}

/// Our own table, beside msprobe's: per graph side (`step`, `rank`, `data_source`), what the
/// diagnosis reads of its nodes (names, parents and children as numbers, micro step, matches,
/// and each entry's statistics as numbers) in a compact binary form, cut into `part`s: part 0
/// says how the graph is written, parts 1… hold its nodes in node order. The converter and
/// `gather` write it into compare files after msprobe's tables (`docs/visdb.md` §5); the
/// diagnosis reads it instead of every row's JSON, and reads the rows when it is absent (msprobe's
/// files), unreadable, or stale: a graph with an edited row (`modified = 1`: msprobe's plugin and
/// our matching both set it) or another number of rows than the table says. Our edits also drop
/// the graph's rows of it, in the edit's own transaction.
pub const DIAGNOSIS_TABLE: &str = diagnosis_table!();

/// Creates [`DIAGNOSIS_TABLE`] and its index (plain columns, any SQLite opens the file).
pub const CREATE_DIAGNOSIS_TABLE: &str = concat!(
    "CREATE TABLE IF NOT EXISTS ",
    diagnosis_table!(),
    " (step INTEGER NOT NULL, rank INTEGER NOT NULL, data_source TEXT NOT NULL, \
part INTEGER NOT NULL, data BLOB NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS ",
    diagnosis_table!(),
    "_part ON ",
    diagnosis_table!(),
    " (step, rank, data_source, part);
"
);

/// The tables a file must have for us to serve it, with the columns we read from each (for
/// `tb_nodes`, the columns of [`NODE_COLUMNS`] that the store reads).
pub const REQUIRED: &[(&str, &[&str])] = &[
    (
        "tb_nodes",
        &[
            "node_order",
            "node_name",
            "node_type",
            "up_node",
            "sub_nodes",
            "precision_index",
            "overflow_level",
            "micro_step_id",
            "matched_node_link",
            "stack_id",
            "parallel_merge_info",
            "matched_distributed",
            "modified",
            "input_data",
            "output_data",
            "data_source",
            "step",
            "rank",
        ],
    ),
    ("tb_stack", &["id", "stack_info"]),
    (
        "tb_config",
        &[
            "graph_type",
            "task",
            "tool_tip",
            "micro_steps",
            "overflow_check",
            "node_colors",
            "rank_list",
            "step_list",
        ],
    ),
];

/// `data_source` of the target ("debug") side.
pub const NPU: &str = "NPU";
/// `data_source` of the golden ("bench") side.
pub const BENCH: &str = "Bench";

#[cfg(test)]
mod tests {
    use super::*;

    /// The columns the store requires of `tb_nodes` are columns of the one list, in its order.
    #[test]
    fn required_node_columns_are_node_columns_in_order() {
        let (_, required) = REQUIRED
            .iter()
            .find(|(table, _)| *table == "tb_nodes")
            .expect("tb_nodes is required");
        let positions: Vec<Option<usize>> = required
            .iter()
            .map(|c| NODE_COLUMNS.iter().position(|n| n == c))
            .collect();
        assert!(positions.iter().all(Option::is_some), "{required:?}");
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{required:?}");
    }
}
