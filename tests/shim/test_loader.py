"""The loader's renaming of other plugins named ``graph_ascend``, on real entry-point objects."""

from __future__ import annotations

import textwrap
from importlib.metadata import EntryPoint

from graph_ascend_tb.loader import GraphAscendLoader, rename_conflicting_plugins
from graph_ascend_tb.plugin import GraphAscendPlugin

GROUP = "tensorboard_plugins"


def test_other_graph_ascend_plugins_are_renamed(tmp_path, monkeypatch):
    (tmp_path / "other_ga_plugin.py").write_text(
        textwrap.dedent(
            """
            from tensorboard.plugins import base_plugin

            class Conflicting(base_plugin.TBPlugin):
                plugin_name = "graph_ascend"

            class AlreadyUsesTheName(base_plugin.TBPlugin):
                plugin_name = "graph_ascend_other_ga_plugin"

            class Unrelated(base_plugin.TBPlugin):
                plugin_name = "scalars_too"
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [
        EntryPoint("taken", "other_ga_plugin:AlreadyUsesTheName", GROUP),
        EntryPoint("broken", "no_such_module_for_graph_ascend:Thing", GROUP),
        EntryPoint("graph_ascend", "other_ga_plugin:Conflicting", GROUP),
        EntryPoint("graph_ascend_rs", "graph_ascend_tb.loader:GraphAscendLoader", GROUP),
        EntryPoint("unrelated", "other_ga_plugin:Unrelated", GROUP),
    ]
    renamed = rename_conflicting_plugins(eps)
    import other_ga_plugin

    assert other_ga_plugin.Conflicting.plugin_name == "graph_ascend_other_ga_plugin_2"
    assert other_ga_plugin.Unrelated.plugin_name == "scalars_too"
    assert GraphAscendPlugin.plugin_name == "graph_ascend"
    assert renamed == [
        ("graph_ascend = other_ga_plugin:Conflicting", "other_ga_plugin.Conflicting", "graph_ascend_other_ga_plugin_2")
    ]


def test_msprobe_module_gets_the_msprobe_name(tmp_path, monkeypatch):
    pkg = tmp_path / "hierarchy_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "plug.py").write_text(
        "from tensorboard.plugins import base_plugin\n"
        "class GraphsPlugin(base_plugin.TBPlugin):\n    plugin_name = 'graph_ascend'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    rename_conflicting_plugins([EntryPoint("graph_ascend", "hierarchy_plugin.plug:GraphsPlugin", GROUP)])
    import hierarchy_plugin.plug

    assert hierarchy_plugin.plug.GraphsPlugin.plugin_name == "graph_ascend_msprobe"


def test_loader_returns_the_plugin_without_starting_anything(tmp_path):
    class Context:
        def __init__(self):
            self.logdir = str(tmp_path)
            self.plugin_name_to_instance = {}

    plugin = GraphAscendLoader().load(Context())
    assert isinstance(plugin, GraphAscendPlugin)
    assert plugin.is_active() is True
    meta = plugin.frontend_metadata()
    assert (meta.es_module_path, meta.tab_name, meta.disable_reload) == ("/index.js", "GRAPH_ASCEND", True)
    assert list(plugin.get_plugin_apps()) == ["/*"]
    assert plugin.sidecar.pid is None, "the sidecar starts on the first request, not at load time"
