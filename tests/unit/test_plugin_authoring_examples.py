"""The examples of docs/plugin-authoring.md that need no broker run as written.

Blocks are cut out of the pages by their ``<!-- example: project path -->`` markers
(:mod:`support.doc_examples`), written to a temporary directory and run in a subprocess, as a
plugin author would run them: the tick plugin's test (the plugin test kit: plugin_kit and
conformance), the same test against a broken plugin (it must catch it), the "by hand" script, and
the sink test of the built-in FileStreamSink. Every other plugin code block of the docs must say it
is a fragment. The examples that need Kafka run in tests/integration/test_docs_examples.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from support.doc_examples import FRAGMENT, ROOT, examples, unmarked_blocks, write

PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto"]


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd), str(ROOT)])})


def tick_project(tmp_path: Path, **replace: str) -> Path:
    files = dict(examples()["tick-plugin"])
    for old, new in replace.items():
        assert old in files["tick_plugin/__init__.py"]
        files["tick_plugin/__init__.py"] = files["tick_plugin/__init__.py"].replace(old, new)
    return write("tick-plugin", files, tmp_path)


def test_every_plugin_code_block_is_an_example_or_says_it_is_a_fragment():
    unmarked = [f"{b.where()} ({b.language}): {b.text.splitlines()[0]}" for b in unmarked_blocks()]
    assert not unmarked, (f"mark these blocks <!-- example: PROJECT PATH --> (a complete example, then run by a "
                          f"test) or start them with '{FRAGMENT} what is missing':\n" + "\n".join(unmarked))
    projects = examples()  # also checks that the README's tick plugin is the guide's
    assert {"tick-plugin", "tick-command", "count-job", "count-routes", "upper-converter", "prefix-transform",
            "file-sink-test"} <= set(projects)


def test_the_documented_plugin_test_passes_against_the_documented_plugin(tmp_path):
    project = tick_project(tmp_path)
    result = run([*PYTEST, "test_tick_plugin.py", "-W", "error::pytest.PytestUnraisableExceptionWarning"], project)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    summary = re.search(r"(\d+) passed", output)
    assert summary, output
    # the conformance class's checks (6 at least) plus the two harness tests, none skipped
    assert int(summary.group(1)) >= 8 and "skipped" not in output and "failed" not in output, output


def test_the_documented_test_would_catch_a_broken_plugin(tmp_path):
    """The doc's test is not vacuous: a tick task that does not resume after a restart fails it."""
    project = tick_project(tmp_path, **{'self.n = 0 if offset is None else offset["n"] + 1': "self.n = 0"})
    result = run([*PYTEST, "test_tick_plugin.py", "-k", "resume"], project)
    assert result.returncode == 1 and "1 failed" in result.stdout, result.stdout + result.stderr


def test_the_by_hand_script_polls_a_first_tick(tmp_path):
    project = tick_project(tmp_path)
    result = run([sys.executable, "try_tick.py"], project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("[SourceRecord(") and "source_offset={'n': 0}" in result.stdout, result.stdout


def test_the_documented_sink_test_passes(tmp_path):
    # a test of the built-in FileStreamSink: nothing to install
    (tmp_path / "test_file_sink.py").write_text(examples()["file-sink-test"]["test_file_sink.py"])
    result = run([*PYTEST, "test_file_sink.py"], tmp_path)
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout + result.stderr
