"""The code examples of the docs, as files: what the docs-are-tests tests install and run.

A complete example is a fenced block right after a marker naming its project and the file it is::

    <!-- example: tick-plugin tick_plugin/__init__.py -->
    ```python
    ...
    ```

Blocks with the same project make one project (a plugin and its ``pyproject.toml``, a test of it,
a script driving it...); the same file shown on two pages (README and the guide) must be the same
text. A block that is not complete says so in its first line (``# Fragment: ...``), for the reader
and for :func:`unmarked_blocks`, which lists every plugin code block that does neither.

:func:`install` pip-installs projects into one target directory (no dependencies, no index, no
build isolation: fast and offline), which a process then gets on ``PYTHONPATH``; a project
without a ``pyproject.toml`` gets the one the guide describes for a single module: an entry point
in the ``mirrorline`` group naming the module.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "plugin-authoring.md"
#: Every page that shows plugin code.
PAGES = (GUIDE, ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != GUIDE.name))

_MARKED = re.compile(r"<!-- example: (\S+) (\S+) -->\n```(\w+)\n(.*?)^```", re.S | re.M)
_FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
FRAGMENT = "# Fragment:"


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int
    language: str
    text: str

    def where(self) -> str:
        """``page:line`` for messages."""
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def examples(pages: tuple[Path, ...] = PAGES) -> dict[str, dict[str, str]]:
    """``{project: {path: text}}`` of every marked block; a file shown twice must be the same text."""
    projects: dict[str, dict[str, str]] = {}
    shown: dict[tuple[str, str], str] = {}
    for page in pages:
        text = page.read_text()
        for match in _MARKED.finditer(text):
            project, path, _language, body = match.groups()
            where = f"{page.relative_to(ROOT)}:{_line(text, match.start())}"
            files = projects.setdefault(project, {})
            if path in files and files[path] != body:
                raise AssertionError(f"{where}: {project}/{path} differs from its copy at {shown[(project, path)]}")
            files[path] = body
            shown.setdefault((project, path), where)
    return projects


def unmarked_blocks(pages: tuple[Path, ...] = PAGES) -> list[Block]:
    """Plugin code blocks that are neither a marked example nor say they are a fragment.

    Plugin code: every python and toml block of the guide; elsewhere, python blocks that use
    ``mirrorline.api`` or ``@hookimpl`` and toml blocks declaring a ``mirrorline`` entry point."""
    out = []
    for page in pages:
        text = page.read_text()
        marked = {m.start(3) - len("```") for m in _MARKED.finditer(text)}
        for match in _FENCE.finditer(text):
            language, body = match.groups()
            if language not in ("python", "toml") or match.start() in marked or body.startswith(FRAGMENT):
                continue
            plugin_code = page == GUIDE or "mirrorline.api" in body or "@hookimpl" in body \
                or "entry-points.mirrorline" in body
            if plugin_code:
                out.append(Block(page, _line(text, match.start()), language, body))
    return out


def write(project: str, files: dict[str, str], root: Path) -> Path:
    """Write ``project``'s files under ``root/project``; add the single-module ``pyproject.toml`` if none."""
    directory = root / project
    for path, text in files.items():
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    if "pyproject.toml" not in files:
        modules = [Path(p).stem for p in files if p.endswith(".py") and "/" not in p and not p.startswith("test_")]
        assert len(modules) == 1, f"{project}: no pyproject.toml and not exactly one module: {sorted(files)}"
        (module,) = modules
        (directory / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
            f'[project]\nname = "docs-{project}"\nversion = "0.1.0"\n\n'
            f'[project.entry-points.mirrorline]\n{module.replace("_", "-")} = "{module}"\n\n'
            f'[tool.setuptools]\npy-modules = ["{module}"]\n')
    return directory


def install(projects: list[Path], target: Path, timeout: float = 180.0) -> None:
    """``pip install`` the project directories into ``target`` (offline, no dependencies, no build isolation)."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
         "--no-index", "--no-build-isolation", "--target", str(target), *map(str, projects)],
        capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr
