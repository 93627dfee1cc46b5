"""TensorBoard's entry point for graph-ascend, and coexistence with msprobe's own GRAPH_ASCEND plugin.

msprobe >= 26 (``mindstudio-probe``) registers ``graph_ascend = hierarchy_plugin.server.plugin:GraphsPlugin``
with the same ``plugin_name = "graph_ascend"``. TensorBoard loads every ``tensorboard_plugins`` entry point
first, then calls each loader's ``load()``, and only then (``TensorBoardWSGI.__init__``) rejects two plugins
with one name — so TensorBoard would not start at all with both packages installed. Users have msprobe
installed (it writes the dumps), so uninstalling it is not an answer.

Our ``load()`` therefore renames any *other* plugin class registered under ``graph_ascend`` (class attribute
``plugin_name``, read by TensorBoard from the instances after every ``load()``) to
``graph_ascend_msprobe`` (or ``graph_ascend_<distribution>``). msprobe's page uses relative URLs, so it
keeps working as its own tab under the new name, next to ours. Every step is guarded: a broken msprobe
install never breaks us, and nothing we do makes TensorBoard fail to start.
"""

from __future__ import annotations

import logging
import re
from typing import Iterable, List, Optional, Tuple

from tensorboard.plugins import base_plugin

logger = logging.getLogger(__name__)

PLUGIN_NAME = "graph_ascend"
OWN_MODULE = "graph_ascend_tb"
ENTRY_POINT_GROUP = "tensorboard_plugins"


def _iter_entry_points(group: str) -> Iterable:
    from importlib import metadata

    eps = metadata.entry_points()
    if hasattr(eps, "select"):
        return eps.select(group=group)
    return eps.get(group, ())  # Python 3.9


def _owner_name(ep) -> str:
    """The distribution that registered an entry point ("" on Python 3.9, where it is not known)."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return ""
    try:
        return str(dist.metadata["Name"] or "")
    except Exception:
        return ""


def _new_name(ep, taken: set) -> str:
    module = ep.value.split(":", 1)[0]
    owner = _owner_name(ep).lower()
    if module.startswith("hierarchy_plugin") or "mindstudio" in owner or "msprobe" in owner:
        base = f"{PLUGIN_NAME}_msprobe"
    else:
        suffix = re.sub(r"[^A-Za-z0-9_]+", "_", owner or module.split(".", 1)[0]).strip("_") or "other"
        base = f"{PLUGIN_NAME}_{suffix}"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


def rename_conflicting_plugins(entry_points: Optional[Iterable] = None) -> List[Tuple[str, str, str]]:
    """Renames other plugin classes named ``graph_ascend``; returns (entry point, class, new name) per rename."""
    renamed = []
    taken = {PLUGIN_NAME}
    eps = list(_iter_entry_points(ENTRY_POINT_GROUP) if entry_points is None else entry_points)
    for ep in eps:
        try:
            if ep.value.split(":", 1)[0].split(".", 1)[0] == OWN_MODULE:
                continue
            target = ep.load()  # already imported by TensorBoard; cached in sys.modules
            cls = target if isinstance(target, type) else type(target)
            if not (isinstance(cls, type) and issubclass(cls, base_plugin.TBPlugin)):
                continue
            if getattr(cls, "plugin_name", None) != PLUGIN_NAME:
                taken.add(str(getattr(cls, "plugin_name", "")))
                continue
            new = _new_name(ep, taken)
            cls.plugin_name = new
            taken.add(new)
            renamed.append((f"{ep.name} = {ep.value}", f"{cls.__module__}.{cls.__qualname__}", new))
            logger.warning(
                "graph-ascend: the TensorBoard plugin %s (entry point %r%s) is also named %r; renamed it to %r "
                "so that both can load. Its tab now appears as %r.",
                f"{cls.__module__}.{cls.__qualname__}",
                ep.name,
                f", from {_owner_name(ep)}" if _owner_name(ep) else "",
                PLUGIN_NAME,
                new,
                new,
            )
        except Exception:  # a broken third-party plugin is TensorBoard's business, never ours
            logger.warning("graph-ascend: could not inspect the TensorBoard plugin entry point %r", ep, exc_info=True)
    return renamed


def _fix_instance_map(context, renamed) -> None:
    """If a renamed plugin was already instantiated, file it under its new name in the shared map."""
    mapping = getattr(context, "plugin_name_to_instance", None)
    if not isinstance(mapping, dict):
        return
    current = mapping.get(PLUGIN_NAME)
    if current is not None and getattr(current, "plugin_name", PLUGIN_NAME) != PLUGIN_NAME:
        mapping[current.plugin_name] = current
        del mapping[PLUGIN_NAME]


class GraphAscendLoader(base_plugin.TBLoader):
    """Loads the GRAPH_ASCEND plugin; never raises into TensorBoard."""

    def define_flags(self, parser):
        from .write_access import ALLOW_ENV, ALLOW_FLAG

        parser.add_argument(
            f"--{ALLOW_FLAG}",
            action="store_true",
            help=(
                "GRAPH_ASCEND: accept conversions and matching edits from other machines too (by default only "
                f"from this machine's own page; same as {ALLOW_ENV}=1). For teams behind a proxy they trust."
            ),
        )

    def load(self, context):
        renamed = []
        try:
            renamed = rename_conflicting_plugins()
            _fix_instance_map(context, renamed)
        except Exception:
            logger.warning("graph-ascend: checking for conflicting plugins failed", exc_info=True)
        try:
            from .plugin import GraphAscendPlugin

            return GraphAscendPlugin(context)
        except Exception:
            logger.error(
                "graph-ascend: the GRAPH_ASCEND plugin failed to load; TensorBoard continues without it", exc_info=True
            )
            return None
