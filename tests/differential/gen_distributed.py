"""Seeded generator of multi-rank dumps with torch.distributed communication, for msprobe's
`distributed_analyzer` (the `matched_distributed` links between ranks).

msprobe links the `Distributed.*` nodes of different ranks when it converts a folder of rank
folders (`-tp step0` with `rank0`, `rank1`, …: ranks mode) or of step folders (steps mode) without
the parallel-merge flags, for a build and for each side of a compare. One seed gives one such
case: a world of 2 to 8 ranks runs a small model whose program calls, in the same order on every rank
that takes part, the communication APIs msprobe knows:

- p2p `send`/`recv`, `isend`/`irecv` (the peer as `dst`/`src` keyword, or positional, which msprobe
  does not read);
- rooted `broadcast`/`reduce` (root positional, which msprobe reads as `input.1`, or as the `src`/
  `dst` keyword, which it does not), `scatter` (`src`), `gather` (`dst`);
- collectives `all_reduce`, `all_gather`, `reduce_scatter`, `all_gather_into_tensor`,
  `reduce_scatter_tensor`, `all_to_all_single`, `barrier`;
- `batch_isend_irecv` with its list of `P2POp`s (op, peer, tag, group_id).

Groups are the world, pairs, halves or strided sets (`group_ranks`, `group_id` = the CRC32 of
`str(group_ranks)` as msprobe's collector writes it), passed as the `group` keyword, positionally,
or not at all (the default group, which the collector does not record). The shapes are those
msprobe 26.2's collector writes (see a real gloo run's dump in `../shared/fixtures/dumps/
dist_stats_a`): the output repeats the arguments after the call, a receive buffer is `null`
before the call, a `torch.ProcessGroup` item holds `group_ranks` and `group_id`.

Then, now and then, one rank departs from the others: it skips a call (the per-rank call counts
shift), names another peer or root, has another group id, a group whose ranks the collector could
not read (`{"type": "torch.ProcessGroup"}`), empty `group_ranks`, or no `group_id`; a rank folder
may be missing (a peer without a dump). Also: md5 and structure tasks, 1 or 2 steps, `-oc` (with
NaN/Inf in some statistics, so that the links carry overflow levels), compares against a golden
of the same program with other values (links carry precision indexes), and MindSpore dumps
(`Cell.` modules; groups are the group's name, a string; `P2POp`s of `mindspore.mint`, whose
`group_id` is null for the default group).

Usage: python gen_distributed.py SEED OUTDIR
"""

from __future__ import annotations

import copy
import json
import os
import random
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_parallel import Values, add_md5, to_mindspore

COLLECTIVES = [
    "all_reduce",
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "all_to_all_single",
    "barrier",
]
ROOTED = ["broadcast", "reduce", "scatter", "gather"]
P2P = [("send", "recv"), ("isend", "irecv")]


def group_id(ranks: list[int]) -> str:
    return f"{zlib.crc32(str(ranks).encode('utf-8')):08x}"


def family_groups(world: int, family: str) -> list[list[int]]:
    """The process groups of one family: each rank is in exactly one."""
    if family == "pairs" and world % 2 == 0:
        return [[r, r + 1] for r in range(0, world, 2)]
    if family == "halves" and world % 2 == 0 and world > 2:
        h = world // 2
        return [list(range(h)), list(range(h, world))]
    if family == "strided" and world % 2 == 0 and world > 2:
        return [list(range(0, world, 2)), list(range(1, world, 2))]
    return [list(range(world))]


def program(x: random.Random, world: int) -> list[dict]:
    """The calls every rank makes, in order (p2p calls only on their two ranks)."""
    ops = []
    for _ in range(x.randint(3, 12)):
        roll = x.random()
        op: dict = {"parent": x.choice([None, None, 0, 1])}
        if roll < 0.3:
            a = x.randrange(world)
            b = x.choice([r for r in range(world) if r != a])
            send, recv = x.choice(P2P)
            op.update(kind="p2p", send=send, recv=recv, pair=(a, b), positional=x.random() < 0.1)
        elif roll < 0.6:
            op.update(kind="rooted", api=x.choice(ROOTED))
        elif roll < 0.9:
            op.update(kind="collective", api=x.choice(COLLECTIVES))
        else:
            op.update(kind="batch", shift=x.choice([1, 1, -1]) if world > 2 else 1)
        if op["kind"] in ("rooted", "collective"):
            op["family"] = x.choice(["world", "world", "pairs", "halves", "strided"])
            op["group_pass"] = x.choices(["kw", "positional", "none"], [0.8, 0.05, 0.15])[0]
            op["root_index"] = x.randrange(8)  # into the group's ranks
            # msprobe reads the root of broadcast/reduce positionally, of scatter/gather by keyword
            op["root_positional"] = x.random() < 0.5
            op["async"] = x.random() < 0.15
        ops.append(op)
    return ops


class Rank:
    """One rank's dump: construct, data and stack order, with msprobe's per-API call counters."""

    def __init__(self, rank: int, v: Values, tag: str):
        self.rank = rank
        self.v = v
        self.tag = tag
        self.construct: dict = {}
        self.data: dict = {}
        self.order: list[str] = []
        self.counts: dict = {}

    def api(self, name: str) -> str:
        n = self.counts.get(name, 0)
        self.counts[name] = n + 1
        return f"{name}.{n}.forward"

    def add(self, node: str, parent, entry: dict):
        self.construct[node] = parent
        self.data[node] = entry
        self.order.append(node)

    def t(self, *key, shape=(2, 8)):
        return self.v.stat(self.tag, *key, shape=shape)


def int_item(v: int) -> dict:
    return {"type": "int", "value": v}


def group_item(ranks: list[int], fault: str | None) -> dict:
    g = {"type": "torch.ProcessGroup", "group_ranks": list(ranks), "group_id": group_id(ranks)}
    if fault == "group_unreadable":
        return {"type": "torch.ProcessGroup"}
    if fault == "group_ranks_empty":
        g["group_ranks"] = []
    elif fault == "group_id_missing":
        del g["group_id"]
    elif fault == "group_id_other":
        g["group_id"] = group_id([*ranks, 99])
    return g


def p2p_item(op: str, tensor, peer: int, gid: str | None) -> dict:
    return {
        "class_type": "torch.distributed.P2POp",
        "tensor": tensor,
        "op": op,
        "peer": peer,
        "tag": 0,
        "group_id": gid,
    }


def emit(r: Rank, i: int, op: dict, world: int, present: list[int], fault: str | None, parent):
    """Rank `r`'s dump entry of call `i` of the program (nothing when it does not take part)."""
    rank = r.rank
    if op["kind"] == "p2p":
        a, b = op["pair"]
        if rank not in (a, b):
            return
        peer = b if rank == a else a
        if fault == "peer_other":
            peer = next((p for p in range(world) if p not in (rank, peer)), peer)
        if rank == a:
            name, key, buf_in, buf_out = op["send"], "dst", r.t(i, "p2p"), r.t(i, "p2p")
            if name == "isend":
                buf_out = None
        else:
            name, key, buf_in, buf_out = op["recv"], "src", None, r.t(i, "p2p")
        if op["positional"]:
            args, kwargs = [buf_in, int_item(peer)], {}
        else:
            args, kwargs = [buf_in], {key: int_item(peer)}
        r.add(
            r.api(f"Distributed.{name}"),
            parent,
            {
                "input_args": args,
                "input_kwargs": kwargs,
                "output": [buf_out, int_item(peer)],
            },
        )
        return
    if op["kind"] == "batch":
        # a ring: send to rank + shift, receive from rank - shift, in the default group
        nxt, prv = (rank + op["shift"]) % world, (rank - op["shift"]) % world
        if fault == "peer_other":
            nxt = (nxt + 1) % world
        gid = group_id(list(range(world)))
        if fault == "group_id_other":
            gid = group_id([99])
        ops_in = [p2p_item("isend", r.t(i, "bs"), nxt, gid), p2p_item("irecv", r.t(i, "br0"), prv, gid)]
        ops_out = [p2p_item("isend", r.t(i, "bs"), nxt, gid), p2p_item("irecv", r.t(i, "br"), prv, gid)]
        if (i + rank) % 3 == 0:
            # now and then the receive first
            ops_in.reverse()
            ops_out.reverse()
        r.add(
            r.api("Distributed.batch_isend_irecv"),
            parent,
            {
                "input_args": [ops_in],
                "input_kwargs": {},
                "output": [ops_out],
            },
        )
        return
    groups = family_groups(world, op["family"])
    ranks = next(g for g in groups if rank in g)
    api = op["api"]
    kwargs: dict = {}
    pos_extra: list = []
    root = ranks[op["root_index"] % len(ranks)]
    if op["kind"] == "rooted" and fault == "root_other":
        root = ranks[(op["root_index"] + 1) % len(ranks)] if len(ranks) > 1 else root + 1
    tin, tout = r.t(i, "in"), r.t(i, "out")
    if api in ("broadcast", "reduce"):
        args = [tin]
        if op["root_positional"]:
            pos_extra = [int_item(root)]
        else:
            kwargs["src" if api == "broadcast" else "dst"] = int_item(root)
        outs = [tout]
    elif api == "scatter":
        lst = [r.t(i, "sc", k, shape=(3,)) for k in range(len(ranks))] if rank == root else None
        args, outs = [None, lst], [r.t(i, "out", shape=(3,)), lst]
        kwargs["src"] = int_item(root)
    elif api == "gather":
        lst = [r.t(i, "ga", k, shape=(3,)) for k in range(len(ranks))] if rank == root else None
        args, outs = [r.t(i, "in", shape=(3,)), None], [r.t(i, "in", shape=(3,)), lst]
        kwargs["dst"] = int_item(root)
    elif api == "all_gather":
        lst = [r.t(i, "ag", k) for k in range(len(ranks))]
        args, outs = [None, tin], [lst, tin]
    elif api in ("all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single", "reduce_scatter"):
        args, outs = [None, tin], [tout, tin]
    elif api == "barrier":
        args, outs = [], []
    else:  # all_reduce
        args, outs = [tin], [tout]
    args = args + pos_extra
    outs = outs + pos_extra
    if op["group_pass"] != "none":
        g = group_item(ranks, fault)
        if op["group_pass"] == "kw":
            kwargs["group"] = g
        else:
            args.append(g)
            outs.append(g)
    if op.get("async"):
        kwargs["async_op"] = {"type": "bool", "value": True}
    # the output repeats the arguments after the call: positional ones, then the keyword ones
    outs = outs + [e for k, e in kwargs.items() if k != "async_op"]
    r.add(r.api(f"Distributed.{api}"), parent, {"input_args": args, "input_kwargs": kwargs, "output": outs})


FAULTS = [
    "skip",
    "peer_other",
    "root_other",
    "group_unreadable",
    "group_ranks_empty",
    "group_id_missing",
    "group_id_other",
]


def rank_dump(x: random.Random, v: Values, rank: int, world: int, present, ops, faults: dict, dump_kind: dict, tag):
    r = Rank(rank, v, tag)
    top = "Module.module.Net.forward.0"
    blocks = [f"Module.module.Net.layers.{k}.Block.forward.0" for k in range(2)]
    pending = list(enumerate(ops))
    r.add(r.api("Torch.randn"), None, {"input_args": [int_item(2), int_item(8)], "output": [r.t("x")]})
    # the calls at the top level before the model, the model (with the calls inside its blocks), after
    for i, op in pending:
        if op["parent"] is None and i % 2 == 0:
            emit_one(r, i, op, world, present, faults, None)
    r.add(top, None, {"input_args": [r.t("x")], "input_kwargs": {}, "output": [r.t("y")]})
    for k, blk in enumerate(blocks):
        r.add(blk, top, {"input_args": [r.t("b", k)], "input_kwargs": {}, "output": [r.t("bo", k)]})
        r.add(r.api("Functional.linear"), blk, {"input_args": [r.t("b", k), r.t("w", k)], "output": [r.t("l", k)]})
        for i, op in pending:
            if op["parent"] == k:
                emit_one(r, i, op, world, present, faults, blk)
    for i, op in pending:
        if op["parent"] is None and i % 2 == 1:
            emit_one(r, i, op, world, present, faults, None)
    construct, data, order = r.construct, r.data, r.order
    if dump_kind["framework"] == "mindspore":
        construct, data, order = to_mindspore(construct, data, order)
        data = {k: ms_groups(e) for k, e in data.items()}
    if dump_kind["task"] == "md5":
        add_md5(data)
    stack = {
        str(i): [[n], [f"File /train/dist_train.py, line {20 + i}, in forward, \n call()"]] for i, n in enumerate(order)
    }
    dump = {
        "task": "structure" if dump_kind["task"] == "structure" else "statistics",
        "level": "mix",
        "framework": dump_kind["framework"],
        "dump_data_dir": None,
        "data": {} if dump_kind["task"] == "structure" else data,
    }
    return construct, dump, stack


def emit_one(r: Rank, i, op, world, present, faults, parent):
    fault = faults.get((r.rank, i))
    if fault == "skip":
        return
    emit(r, i, op, world, present, fault, parent)


def ms_groups(v):
    """MindSpore's collector: a group is its name (a string); P2POps are `mindspore.mint`'s, with a
    null group_id for the default group."""
    if isinstance(v, list):
        return [ms_groups(e) for e in v]
    if isinstance(v, dict):
        if v.get("type") == "torch.ProcessGroup":
            return {
                "type": "str",
                "value": "hccl_world_group" if "group_ranks" not in v else f"group_{v.get('group_id')}",
            }
        if v.get("class_type") == "torch.distributed.P2POp":
            out = dict(v, class_type="mindspore.mint.distributed.P2POp", tensor=ms_groups(v["tensor"]))
            out["group_id"] = None
            return out
        return {k: ms_groups(e) for k, e in v.items()}
    return v


def write_side(x: random.Random, seed: int, root: str, world: int, present, ops, faults, steps, dump_kind, tag):
    v = Values(seed, x.choice(["f32"] * 4 + ["f16", "bf16"]), x)
    for step in range(steps):
        for rank in present:
            d = os.path.join(root, f"step{step}", f"rank{rank}")
            os.makedirs(d, exist_ok=True)
            v.seed = seed * 31 + step
            c, dp, st = rank_dump(x, v, rank, world, present, ops, faults, dump_kind, tag)
            for fname, obj in (("construct.json", c), ("dump.json", dp), ("stack.json", st)):
                with open(os.path.join(d, fname), "w") as f:
                    json.dump(obj, f, indent=1)


def make_case(seed: int, out: str) -> dict:
    x = random.Random(seed * 7919 + 5)
    world = x.choice([2, 2, 2, 3, 4, 4, 4, 8])
    ops = program(x, world)
    present = list(range(world))
    if world > 2 and x.random() < 0.1:
        present.remove(x.randrange(world))
    faults: dict = {}
    if x.random() < 0.5:
        for _ in range(x.randint(1, 3)):
            faults[(x.randrange(world), x.randrange(len(ops)))] = x.choice(FAULTS)
    dump_kind = {
        "task": x.choice(["statistics"] * 8 + ["md5", "structure"]),
        "framework": "mindspore" if x.random() < 0.1 else "pytorch",
    }
    compare = x.random() < 0.4
    steps = 2 if x.random() < 0.25 else 1
    mode = dump_kind["task"]
    case = {
        "seed": seed,
        "mode": mode,
        "framework_target": dump_kind["framework"],
        "framework_golden": dump_kind["framework"],
        "compare": compare,
        "world": world,
        "ranks": present,
        "steps": steps,
        "faults": [[r, i, f] for (r, i), f in sorted(faults.items())],
        "program": copy.deepcopy(ops),
    }
    write_side(x, seed, os.path.join(out, "target"), world, present, ops, faults, steps, dump_kind, "t")
    if compare:
        # the same program, other values where the golden's seed differs; its own faults now and then
        gfaults = faults if x.random() < 0.7 else {}
        write_side(
            x,
            seed if x.random() < 0.5 else seed + 1,
            os.path.join(out, "golden"),
            world,
            present,
            ops,
            gfaults,
            steps,
            dump_kind,
            "g" if x.random() < 0.5 else "t",
        )
    opts: list[str] = []
    if x.random() < 0.2:
        opts.append("-oc")
    if compare and x.random() < 0.1:
        opts.append("-fm")
    opts += [f for f in ("-tensor_log", "-progress_log") if x.random() < 0.05]
    case["options"] = opts
    top = "step0" if steps == 1 else ""
    case["target"] = os.path.join("target", top).rstrip("/")
    if compare:
        case["golden"] = os.path.join("golden", top).rstrip("/")
    with open(os.path.join(out, "case.json"), "w") as f:
        json.dump(case, f, indent=1)
    return case


if __name__ == "__main__":
    print(json.dumps(make_case(int(sys.argv[1]), sys.argv[2])))
