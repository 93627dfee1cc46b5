"""Write a synthetic compare .vis.db in msprobe 26.2's schema, for the page's benchmarks.

Both sides get the same tree: a root holding `layers` modules; each layer holds `subs` sub-modules,
each with `leaves` API leaves; layer 0 also holds a module `Module.wide.Wide.forward.0` with
`wide` leaf children (the "expand a node with 1,000 children" case). Every node is matched to its
twin on the other side; precision indices cycle through pass/warning/error. Usage:
    python3 make_big_visdb.py OUT.vis.db [layers subs leaves wide]
"""

import json
import os
import sqlite3
import sys


def main() -> None:
    out = sys.argv[1]
    layers, subs, leaves, wide = (int(x) for x in (sys.argv[2:6] or [100, 10, 98, 1000]))
    tmp = out + ".tmp"
    if os.path.exists(tmp):
        os.remove(tmp)
    db = sqlite3.connect(tmp)
    db.executescript(
        """
        CREATE TABLE tb_nodes (id TEXT PRIMARY KEY, graph_id TEXT NOT NULL, node_order INTEGER NOT NULL,
          node_name TEXT NOT NULL, node_type TEXT NOT NULL, up_node TEXT, sub_nodes TEXT, precision_index INTEGER,
          overflow_level TEXT, micro_step_id INTEGER NOT NULL, matched_node_link TEXT, stack_id TEXT,
          parallel_merge_info TEXT, matched_distributed TEXT, modified INTEGER NOT NULL, input_data TEXT,
          output_data TEXT, data_source TEXT, dump_data_dir TEXT, step INTEGER NOT NULL, rank INTEGER NOT NULL,
          is_distributed INTEGER);
        CREATE TABLE tb_config (id TEXT PRIMARY KEY, graph_type TEXT NOT NULL, task TEXT, tool_tip TEXT,
          micro_steps INTEGER, overflow_check INTEGER, node_colors TEXT NOT NULL, rank_list TEXT NOT NULL,
          step_list TEXT NOT NULL);
        CREATE TABLE tb_stack (id TEXT PRIMARY KEY, stack_info TEXT);
        """
    )
    colors = {
        "#FFFCF3": {"value": [0, 0.3], "description": "pass", "accuracy_level": "pass"},
        "#FFDC7F": {"value": [0.3, 0.6], "description": "warning", "accuracy_level": "warning"},
        "#FF704D": {"value": [0.6, 1], "description": "error", "accuracy_level": "error"},
        "#C7C7C7": {"value": [], "description": "unmatched", "accuracy_level": "unmatched node"},
    }
    db.execute(
        "INSERT INTO tb_config VALUES ('1','compare','summary','{}',1,0,?, '[0]','[0]')",
        (json.dumps(colors),),
    )
    tree = {}  # name -> (type, parent, children)
    order = []

    def add(name, kind, parent):
        tree[name] = (kind, parent, [])
        order.append(name)
        if parent:
            tree[parent][2].append(name)

    add("DefaultModel", 0, "")
    for i in range(layers):
        layer = f"Module.layers.{i}.Layer.forward.0"
        add(layer, 0, "DefaultModel")
        if i == 0:
            w = "Module.wide.Wide.forward.0"
            add(w, 0, layer)
            for k in range(wide):
                add(f"Torch.wide_op.{k}.forward", 1, w)
        for j in range(subs):
            sub = f"Module.layers.{i}.sub{j}.Sub.forward.0"
            add(sub, 0, layer)
            for k in range(leaves):
                add(f"Torch.op_{i}_{j}.{k}.forward", 1, sub)
    stack = json.dumps(["File train.py, line 1, in <module>, \n model(x)"])
    slot = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": "[2, 8]", "Max": "1.0", "Min": "-1.0",
            "Mean": "0.0", "Norm": "2.0", "MaxRelativeErr": "1.0%"}
    for src in ("NPU", "Bench"):
        gid = f"{src}_0_0"
        db.execute("INSERT INTO tb_stack VALUES (?, ?)", (f"{gid}_0", stack))
        rows = []
        for n, name in enumerate(order):
            kind, parent, children = tree[name]
            data = json.dumps({f"{name}.input.0": slot})
            rows.append((f"{gid}_{name}", gid, n, name, str(kind), parent, json.dumps(children) if children else "",
                         (n % 10) / 10 if src == "NPU" else None, None, 0, json.dumps([name]), f"{gid}_0", "",
                         "{}", 0, data, data, src, "", 0, 0, 0))
            if len(rows) >= 5000:
                db.executemany("INSERT INTO tb_nodes VALUES (" + ",".join("?" * 22) + ")", rows)
                rows = []
        db.executemany("INSERT INTO tb_nodes VALUES (" + ",".join("?" * 22) + ")", rows)
    for i, cols in enumerate([
        "step, rank, data_source, up_node, node_order", "step, rank, data_source, node_name",
        "step, rank, data_source, node_order", "step, rank, node_order", "step, rank, micro_step_id, node_order",
        "step, rank, modified, matched_node_link", "is_distributed",
    ]):
        db.execute(f"CREATE INDEX index{i + 1} ON tb_nodes ({cols})")
    db.commit()
    db.close()
    os.replace(tmp, out)
    print(f"{out}: {len(order)} nodes per side")


if __name__ == "__main__":
    main()
