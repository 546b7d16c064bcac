"""``mirrorline plugin new`` without installing anything: names, refusals, and what the generated files contain.

The round trip (install, the generated tests, a real worker) is tests/integration/test_plugin_scaffold.py.
"""

from __future__ import annotations

import ast
import re
import tomllib

import pytest

from mirrorline.cli.main import main
from mirrorline.scaffold import KINDS, Names, ScaffoldError, new_plugin


def test_names_of_a_plugin():
    assert Names.of("acme-orders") == Names("acme-orders", "acme_orders", "AcmeOrders", "mirrorline-acme-orders")
    assert Names.of("mirrorline-tick") == Names("mirrorline-tick", "mirrorline_tick", "MirrorlineTick", "mirrorline-tick")
    assert Names.of("myKafka_2").Name == "MyKafka2"


@pytest.mark.parametrize("name", ["3d", "a b", "ünï", "-x", "json", "class", "mirrorline", "tests", ""])
def test_names_that_cannot_make_a_plugin_package_are_refused(name):
    with pytest.raises(ScaffoldError, match="plugin name"):
        Names.of(name)


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_is_a_complete_project_using_only_the_plugin_api(kind, tmp_path):
    written = new_plugin("acme-orders", kind, tmp_path / "p")
    files = {p.relative_to(tmp_path / "p").as_posix(): p.read_text() for p in written}
    assert {"pyproject.toml", "README.md", "acme_orders/__init__.py", "tests/test_acme_orders.py"} <= set(files)
    assert not [path for path, text in files.items() if "{{" in text or "{{" in path]  # every placeholder filled
    project = tomllib.loads(files["pyproject.toml"])
    assert project["project"]["entry-points"]["mirrorline"] == {"acme_orders": "acme_orders"}
    assert project["project"]["dependencies"] == []  # mirrorline is the host, never a dependency
    assert project["tool"]["pytest"]["ini_options"]["asyncio_mode"] == "auto"
    for path, text in files.items():
        if not path.endswith(".py"):
            continue
        imported = {node.module for node in ast.walk(ast.parse(text)) if isinstance(node, ast.ImportFrom)}
        imported |= {a.name for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Import) for a in node.names}
        ours = {m for m in imported if m and m.split(".")[0] == "mirrorline"}
        allowed = {"mirrorline.api"} | ({"mirrorline.testing.conformance", "mirrorline.testing.plugin_kit"}
                                        if path.startswith("tests/") else set())
        assert ours <= allowed, (path, ours)  # plugins import mirrorline.api only (tests: the test kit)
    hook = {"source": "register_connectors", "sink": "register_connectors", "transform": "register_transforms"}[kind]
    assert re.search(rf"@hookimpl\ndef {hook}\(\)", files["acme_orders/__init__.py"])


def test_an_existing_directory_is_never_overwritten(tmp_path):
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "keep.txt").write_text("mine")
    with pytest.raises(ScaffoldError, match="already exists"):
        new_plugin("acme", "source", tmp_path / "acme")
    assert [p.name for p in (tmp_path / "acme").iterdir()] == ["keep.txt"]
    with pytest.raises(ScaffoldError, match="plugin kind"):
        new_plugin("acme", "job", tmp_path / "other")


def test_the_command_writes_a_project_or_fails_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["plugin", "new", "acme-orders", "--sink"]) == 0
    out = capsys.readouterr().out
    assert "Created the sink plugin acme-orders in acme-orders:" in out and "pip install -e" in out
    assert (tmp_path / "acme-orders" / "acme_orders" / "connector.py").is_file()
    assert main(["plugin", "new", "acme-orders"]) == 1
    assert capsys.readouterr().err.strip() == ("mirrorline: error: acme-orders already exists and is not an empty "
                                               "directory: nothing was written")
    with pytest.raises(SystemExit):  # argparse: one kind only
        main(["plugin", "new", "x", "--source", "--sink"])
