"""The layers of the house, checked statically: which package may import which, and no circles.

Every import in ``framework/`` (the ``mirrorline`` package) and ``connectors/``
(``mirrorline.connectors``) is read with the api contract test's scanner (top level, nested,
``TYPE_CHECKING`` and literal ``import_module`` calls alike) and mapped to its package.
:data:`MAY_IMPORT` is the whole picture, lowest layer first; docs/architecture.md draws it.
An import it does not allow fails here, as does any circle between modules.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from test_api_contract import ROOT, _module_name, _python_files, imported_modules  # same folder

#: package -> the packages it may import (besides itself). Lowest layers first.
MAY_IMPORT: dict[str, set[str]] = {
    "mirrorline": set(),  # the package's own __init__: a version and a docstring
    "mirrorline.api": set(),
    "mirrorline.maven": set(),
    "mirrorline.scaffold": {"mirrorline.api"},  # plugin project templates (mirrorline plugin new)
    "mirrorline.clients": {"mirrorline.api"},
    "mirrorline.storage": {"mirrorline.api", "mirrorline.clients"},
    "mirrorline.plugins": {"mirrorline.api"},
    "mirrorline.converters": {"mirrorline.api"},
    "mirrorline.transforms": {"mirrorline.api"},
    "mirrorline.localkafka": {"mirrorline.api", "mirrorline.clients", "mirrorline.maven"},
    "mirrorline.runtime": {"mirrorline.api", "mirrorline.clients", "mirrorline.storage", "mirrorline.plugins",
                           "mirrorline.converters"},
    "mirrorline.runtime.distributed": {"mirrorline.api", "mirrorline.clients", "mirrorline.storage",
                                       "mirrorline.plugins", "mirrorline.runtime"},
    "mirrorline.spark": {"mirrorline.api", "mirrorline.clients", "mirrorline.storage", "mirrorline.maven",
                         "mirrorline.runtime"},
    "mirrorline.rest": {"mirrorline.api", "mirrorline.clients", "mirrorline.runtime"},
    "mirrorline.boot": {"mirrorline.api", "mirrorline.clients", "mirrorline.storage", "mirrorline.plugins",
                        "mirrorline.runtime", "mirrorline.runtime.distributed", "mirrorline.spark",
                        "mirrorline.rest"},
    "mirrorline.cli": {"mirrorline.api", "mirrorline.clients", "mirrorline.plugins", "mirrorline.localkafka",
                       "mirrorline.runtime", "mirrorline.boot", "mirrorline.scaffold"},
    "mirrorline.testing": {"mirrorline.api", "mirrorline.clients", "mirrorline.plugins", "mirrorline.localkafka",
                           "mirrorline.runtime"},
    # connectors: the API and the mirror client only, like a third party's plugin; mm2 (dedicated
    # mode, MM2's MirrorMaker driver) also knows the three MM2 connectors it configures
    "mirrorline.connectors": set(),
    "mirrorline.connectors.mirror_client": {"mirrorline.api"},
    "mirrorline.connectors.file": {"mirrorline.api"},
    "mirrorline.connectors.source_mirror": {"mirrorline.api", "mirrorline.connectors.mirror_client"},
    "mirrorline.connectors.checkpoint": {"mirrorline.api", "mirrorline.connectors.mirror_client"},
    "mirrorline.connectors.heartbeat": {"mirrorline.api", "mirrorline.connectors.mirror_client"},
    "mirrorline.connectors.mm2": {"mirrorline.api", "mirrorline.connectors.mirror_client",
                                  "mirrorline.connectors.source_mirror", "mirrorline.connectors.checkpoint",
                                  "mirrorline.connectors.heartbeat"},
    "mirrorline.connectors.faust_failover": {"mirrorline.api", "mirrorline.connectors.mirror_client",
                                             "mirrorline.connectors.mm2"},
}

FILES = _python_files(ROOT / "framework") + _python_files(ROOT / "connectors")
MODULES = {_module_name(path): path for path in FILES}


def package_of(module: str) -> str | None:
    """The most specific package of :data:`MAY_IMPORT` that holds ``module`` (None: not ours)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in MAY_IMPORT:
            return candidate
    return None


def test_every_package_is_placed():
    unplaced = sorted({module for module in MODULES if package_of(module) is None})
    assert not unplaced, f"modules outside every layer (add their package to MAY_IMPORT): {unplaced}"
    folders = {path.parent for path in FILES if path.name == "__init__.py"}
    named = {_module_name(folder / "__init__.py") for folder in folders}
    top_level = {m for m in named if m.count(".") == 1 or m.startswith("mirrorline.connectors.")
                 and m.count(".") == 2}
    assert not sorted(top_level - set(MAY_IMPORT)), "a new package needs its line in MAY_IMPORT"


def _package_edges() -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module, path in MODULES.items():
        here = package_of(module)
        for line, imported in imported_modules(path):
            there = package_of(imported) if imported.startswith("mirrorline") else None
            # the root package holds only ``__version__``: anyone may read it
            if there is not None and there not in (here, "mirrorline"):
                edges[(here, there)].append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    return edges


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_package_imports_only_what_its_layer_allows(package):
    bad = [where for (here, there), wheres in _package_edges().items() if here == package
           and there not in MAY_IMPORT[package] for where in wheres]
    assert not bad, f"{package} may import only {sorted(MAY_IMPORT[package])}:\n" + "\n".join(bad)


def test_allowed_dependencies_form_no_circle():
    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in MAY_IMPORT[start]:
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    circular = [p for p in MAY_IMPORT if reaches(p, p, {p})]
    assert not circular, f"MAY_IMPORT allows a circle through {circular}"


def _module_edges() -> dict[str, set[str]]:
    """module -> modules it imports; ``from pkg import sub`` counts as importing ``pkg.sub``, and a
    module's own parent packages (which Python imports first anyway) are left out."""
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        by_line: dict[int, list[str]] = defaultdict(list)
        for line, imported in imported_modules(path):
            by_line[line].append(imported)
        for names in by_line.values():
            known = [n for n in names if n in MODULES]
            submodules = [n for n in known if any(n.startswith(o + ".") for o in names if o != n)]
            for target in submodules or known:
                if target != module and not module.startswith(target + "."):
                    edges[module].add(target)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_through_others():
    cycles = _cycles(_module_edges())
    assert not cycles, "import circles between modules:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_checks_see_a_circle_and_an_upward_import():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert "mirrorline.rest" not in MAY_IMPORT["mirrorline.runtime"]
    assert package_of("mirrorline.runtime.distributed.herder") == "mirrorline.runtime.distributed"
    assert package_of("mirrorline.connectors.mm2.flow_plan") == "mirrorline.connectors.mm2"
    assert Path(MODULES["mirrorline.runtime.herder"]).name == "herder.py"
