"""Every import of mirrorline that a doc's code sample shows works as written.

Code samples drift when modules move (the ``framework`` -> ``mirrorline`` rename moved all of
them once). Each ```python block of README.md and docs/*.md is read; every ``import mirrorline...``
and ``from mirrorline... import ...`` statement in it (wherever it stands in the block) is run
as is, so a moved module or a renamed name fails here with the doc and line.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)
_IMPORT = re.compile(r"^\s*(?:from\s+mirrorline[\w.]*\s+import\s+.+|import\s+mirrorline[\w.]*(?:\s+as\s+\w+)?)\s*$")


def _statements(block: str) -> list[str]:
    """The mirrorline import statements of one code block (a parenthesised import may span lines)."""
    try:
        tree = ast.parse(block)
    except SyntaxError:  # a fragment: take the import lines one by one
        return [line.strip() for line in block.splitlines() if _IMPORT.match(line) and "(" not in line]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mirrorline") and not node.level:
            found.append(ast.unparse(node))
        elif isinstance(node, ast.Import) and any(a.name.startswith("mirrorline") for a in node.names):
            found.append(ast.unparse(node))
    return found


def _samples() -> list[tuple[str, str]]:
    samples = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            for statement in _statements(match.group(1)):
                samples.append((f"{doc.relative_to(ROOT)}:{line}", statement))
    return samples


SAMPLES = _samples()


def test_the_docs_have_samples_to_check():
    assert len(SAMPLES) >= 10
    assert any("mirrorline.api" in statement for _, statement in SAMPLES)


@pytest.mark.parametrize(("where", "statement"), SAMPLES, ids=[f"{w} {s}" for w, s in SAMPLES])
def test_sample_import_works(where, statement):
    namespace: dict = {"importlib": importlib}
    try:
        exec(compile(statement, where, "exec"), namespace)  # noqa: S102 - the doc's own import line
    except ImportError as exc:
        pytest.fail(f"{where}: `{statement}` fails: {exc}")


#: Dotted names in the docs that are not Python objects: record header names and file names.
NOT_PYTHON = {"mirrorline.sync.writer", "mirrorline.sync.sequence", "mirrorline.sync.resumes", "mirrorline.json", "mirrorline.offsets"}


def _resolves(name: str) -> bool:
    """Whether ``mirrorline.a.b`` names a module, or an attribute reached from the longest importable module."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for attribute in parts[end:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def test_every_dotted_mirrorline_name_in_the_docs_exists():
    """Prose names modules and classes too (``mirrorline.testing.plugin_kit``): each must exist."""
    missing = set()
    for doc in DOCS:
        for match in re.finditer(r"\bmirrorline(?:\.[A-Za-z_]\w*)+", doc.read_text(encoding="utf-8")):
            if match.group(0) not in NOT_PYTHON and not _resolves(match.group(0)):
                missing.add(f"{doc.relative_to(ROOT)}: {match.group(0)}")
    assert not missing, "names the docs give that do not exist:\n" + "\n".join(sorted(missing))
