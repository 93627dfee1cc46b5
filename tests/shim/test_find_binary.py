"""Where the plugin looks for the sidecar binary: $GRAPH_ASCEND_BINARY, the wheel's, then PATH."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from graph_ascend_tb import sidecar


def _executable(folder: Path, name: str = "graph-ascend") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def places(tmp_path, monkeypatch):
    """Empty scripts, user-scripts, interpreter and PATH folders, standing in for the real ones."""
    dirs = {name: tmp_path / name for name in ("scripts", "user", "interpreter", "path")}
    for d in dirs.values():
        d.mkdir()

    def get_path(name, scheme=None):
        assert name == "scripts"
        return str(dirs["user"] if scheme else dirs["scripts"])

    monkeypatch.setattr(sidecar.sysconfig, "get_path", get_path)
    monkeypatch.setattr(sys, "executable", str(dirs["interpreter"] / "python"))
    monkeypatch.setenv("PATH", str(dirs["path"]))
    monkeypatch.delenv(sidecar.BINARY_ENV, raising=False)
    return dirs


def test_the_environment_variable_wins(places, tmp_path, monkeypatch):
    _executable(places["scripts"])
    chosen = _executable(tmp_path / "elsewhere")
    monkeypatch.setenv(sidecar.BINARY_ENV, str(chosen))
    assert sidecar.find_binary() == str(chosen)


def test_an_unusable_environment_variable_is_an_error_not_a_fallback(places, tmp_path, monkeypatch):
    _executable(places["scripts"])
    monkeypatch.setenv(sidecar.BINARY_ENV, str(tmp_path / "missing"))
    with pytest.raises(sidecar.SidecarError, match="is not an executable file"):
        sidecar.find_binary()


def test_the_wheels_binary_comes_before_path(places):
    _executable(places["path"])
    installed = _executable(places["scripts"])
    assert sidecar.find_binary() == str(installed)


def test_the_user_scripts_folder_and_the_interpreters_folder_are_looked_at(places):
    _executable(places["path"])
    beside_python = _executable(places["interpreter"])
    assert sidecar.find_binary() == str(beside_python)
    user = _executable(places["user"])
    assert sidecar.find_binary() == str(user)


def test_path_is_the_last_resort(places):
    on_path = _executable(places["path"])
    assert sidecar.find_binary() == str(on_path)


def test_a_file_without_the_executable_bit_is_skipped(places):
    (places["scripts"] / "graph-ascend").write_text("not a program")
    on_path = _executable(places["path"])
    assert sidecar.find_binary() == str(on_path)


def test_nothing_found_names_every_place_looked_at(places):
    with pytest.raises(sidecar.SidecarError) as err:
        sidecar.find_binary()
    message = str(err.value)
    for folder in ("scripts", "user", "interpreter"):
        assert os.path.join(str(places[folder]), "graph-ascend") in message
    assert "PATH" in message and "pip install graph-ascend" in message
