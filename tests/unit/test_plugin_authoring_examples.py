"""The examples of docs/plugin-authoring.md run as written: the 39-line plugin, and the test of it in
"Testing your plugin", which uses the plugin test kit (mirrorline.testing.plugin_kit, conformance).

Both blocks are cut out of the document, written to a temporary directory and run with pytest in
a subprocess, as a plugin author would run them; no broker is involved.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "plugin-authoring.md"


def _block_after(marker: str) -> str:
    """The first ```python block after ``marker`` in the document."""
    text = DOC.read_text()
    start = text.index(marker)
    match = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
    assert match, f"no python block after {marker!r}"
    return match.group(1)


def test_the_documented_plugin_test_passes_against_the_documented_plugin(tmp_path):
    package = tmp_path / "tick_plugin"
    package.mkdir()
    (package / "__init__.py").write_text(_block_after("## A complete plugin in 39 lines"))
    test_file = tmp_path / "test_tick_plugin.py"
    test_file.write_text(_block_after("This `test_tick_plugin.py`"))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(test_file), "-q", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto",
         "-W", "error::pytest.PytestUnraisableExceptionWarning"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])})
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    summary = re.search(r"(\d+) passed", output)
    assert summary, output
    # the conformance class's checks (6 at least) plus the two harness tests, none skipped
    assert int(summary.group(1)) >= 8 and "skipped" not in output and "failed" not in output, output


def test_the_documented_test_would_catch_a_broken_plugin(tmp_path):
    """The doc's test is not vacuous: a tick task that does not resume after a restart fails it."""
    package = tmp_path / "tick_plugin"
    package.mkdir()
    plugin = _block_after("## A complete plugin in 39 lines")
    broken = plugin.replace('self.n = 0 if offset is None else offset["n"] + 1', "self.n = 0")
    assert broken != plugin
    (package / "__init__.py").write_text(broken)
    test_file = tmp_path / "test_tick_plugin.py"
    test_file.write_text(_block_after("This `test_tick_plugin.py`"))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(test_file), "-q", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto",
         "-k", "resume"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])})
    assert result.returncode == 1 and "1 failed" in result.stdout, result.stdout + result.stderr
