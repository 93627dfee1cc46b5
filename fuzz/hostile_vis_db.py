#!/usr/bin/env python3
"""Writes the hand-made hostile `.vis.db` seeds of the `vis_db` corpus (run from the repository root).

Each is a tiny msprobe-shaped file (msprobe's schema, a three-node build) changed the way an attacker
would: a trigger that writes on every edit, a trigger that loops, a view or a virtual table where
msprobe's tables should be, a generated column, a 1,000-deep chain of modules. The store refuses the
first five when it opens them; the fuzzer mutates them all.
"""

import os
import sqlite3
import sys

SCHEMA = """
CREATE TABLE tb_nodes (id TEXT PRIMARY KEY, graph_id TEXT NOT NULL, node_order INTEGER NOT NULL,
  node_name TEXT NOT NULL, node_type TEXT NOT NULL, up_node TEXT, sub_nodes TEXT, precision_index INTEGER,
  overflow_level TEXT, micro_step_id INTEGER NOT NULL, matched_node_link TEXT, stack_id TEXT,
  parallel_merge_info TEXT, matched_distributed TEXT, modified INTEGER NOT NULL, input_data TEXT,
  output_data TEXT, data_source TEXT, dump_data_dir TEXT, step INTEGER NOT NULL, rank INTEGER NOT NULL,
  is_distributed INTEGER);
CREATE TABLE tb_stack (id TEXT PRIMARY KEY, stack_info TEXT);
CREATE TABLE tb_config (id TEXT PRIMARY KEY, graph_type TEXT NOT NULL, task TEXT, tool_tip TEXT,
  micro_steps INTEGER, overflow_check INTEGER, node_colors TEXT NOT NULL, rank_list TEXT NOT NULL,
  step_list TEXT NOT NULL);
"""
INDEXES = """
CREATE INDEX index1 ON tb_nodes (step, rank, data_source, up_node, node_order);
CREATE INDEX index2 ON tb_nodes (step, rank, data_source, node_name);
CREATE INDEX index3 ON tb_nodes (step, rank, data_source, node_order);
CREATE INDEX index4 ON tb_nodes (step, rank, node_order);
CREATE INDEX index5 ON tb_nodes (step, rank, micro_step_id, node_order);
CREATE INDEX index6 ON tb_nodes (step, rank, modified, matched_node_link);
CREATE INDEX index7 ON tb_nodes (is_distributed);
"""

HOSTILE = {
    "hostile_trigger_endless_write.vis.db": "CREATE TRIGGER grow AFTER UPDATE ON tb_nodes BEGIN "
    "UPDATE tb_nodes SET modified = modified + 1 WHERE rowid = new.rowid; END",
    "hostile_trigger_loop.vis.db": "CREATE TRIGGER spin AFTER UPDATE ON tb_config BEGIN "
    "SELECT count(*) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT i FROM n); END",
    "hostile_view_nodes.vis.db": "ALTER TABLE tb_nodes RENAME TO real_nodes; "
    "CREATE VIEW tb_nodes AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
    "SELECT real_nodes.* FROM real_nodes, n",
    "hostile_virtual_stack.vis.db": "DROP TABLE tb_stack; CREATE VIRTUAL TABLE tb_stack USING fts5(id, stack_info)",
    "hostile_generated_column.vis.db": "ALTER TABLE tb_stack ADD COLUMN g AS (printf('%.*c', 100000000, 'x')) VIRTUAL",
    "deep_chain_1000.vis.db": None,
}


def node(name, parent, order, children):
    return (f"NPU_0_0_{name}", "NPU_0_0", order, name, "0", parent, repr(children).replace("'", '"') if children else "",
            None, None, 0, "[]", "", "", "{}", 0, "{}", "{}", "NPU", None, 0, 0, 0)


def write(path, depth, extra):
    if os.path.exists(path):
        os.remove(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size = 1024")
    conn.executescript(SCHEMA)
    names = [f"M{i}" for i in range(depth)]
    rows = []
    for i, name in enumerate(names):  # post-order: the deepest first, the root last
        parent = names[i - 1] if i else ""
        children = [names[i + 1]] if i + 1 < depth else []
        rows.append(node(name, parent, depth - 1 - i, children))
    conn.executemany("INSERT INTO tb_nodes VALUES (" + ",".join("?" * 22) + ")", rows)
    conn.execute("INSERT INTO tb_stack VALUES ('NPU_0_0_0', '[]')")
    conn.execute("INSERT INTO tb_config VALUES ('1', 'build', '', NULL, 1, 0, 'null', '[0]', '[0]')")
    conn.executescript(INDEXES)
    if extra:
        conn.executescript(extra)
    conn.commit()
    conn.execute("VACUUM")
    conn.close()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus/vis_db"
    for name, extra in HOSTILE.items():
        write(os.path.join(out, name), 1000 if extra is None else 3, extra)


if __name__ == "__main__":
    main()
