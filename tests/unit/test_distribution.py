"""What the ``mirrorline`` distribution installs: one import namespace, no test helpers, no pytest at import.

The wheel is built from the working tree as ``pip wheel`` builds it (an isolated build
environment with pyproject.toml's build requirements) and its file list read: every top-level name must be ``mirrorline`` (or its
dist-info), and none of the suite's own helpers (tests/support) may ride along.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The plugin authors' test kit: fakes and a harness (plugin_kit), a conformance suite and real-Kafka
#: fixtures (both pytest parts). The suite's own helpers live in tests/support and are never installed.
KIT = {"__init__.py", "plugin_kit.py", "conformance.py", "fixtures.py"}


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory) -> list[str]:
    """The file names inside a wheel built from this checkout."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--disable-pip-version-check", "-w", str(out), str(ROOT)], check=True, capture_output=True)
    wheel = next(out.glob("mirrorline-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_only_top_level_name_is_mirrorline(wheel_names):
    top = {name.split("/")[0] for name in wheel_names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"mirrorline"}, sorted(top)
    top_level_txt = next(n for n in wheel_names if n.endswith(".dist-info/top_level.txt"))
    assert top_level_txt  # present; its content is checked through the file list above


def test_the_connectors_and_the_test_kit_are_inside(wheel_names):
    for expected in ("mirrorline/api/__init__.py", "mirrorline/connectors/source_mirror/task.py",
                     "mirrorline/connectors/mirror_client/formats.py", "mirrorline/testing/plugin_kit.py",
                     "mirrorline/boot/process.py", "mirrorline/rest/ui/index.html"):
        assert expected in wheel_names, expected


def test_no_test_only_module_is_inside(wheel_names):
    assert not [n for n in wheel_names if n.split("/")[0] in ("support", "tests")]
    kit = {Path(n).name for n in wheel_names if n.startswith("mirrorline/testing/") and n.endswith(".py")}
    assert kit == KIT, f"mirrorline.testing holds only the plugin authors' kit; test helpers go to tests/support: {kit}"
    support = {p.name for p in (ROOT / "tests" / "support").glob("*.py")}
    assert support and not support & kit


def test_only_the_kits_pytest_parts_import_pytest():
    importers = sorted(str(p.relative_to(ROOT)) for folder in ("framework", "connectors")
                       for p in (ROOT / folder).rglob("*.py") if "import pytest" in p.read_text())
    assert importers == ["framework/testing/conformance.py", "framework/testing/fixtures.py"], importers


def test_the_test_kit_imports_without_pytest():
    """``mirrorline.testing`` and its plugin kit need pytest only when its pytest parts are used."""
    probe = ("import sys\nsys.modules['pytest'] = None  # importing pytest now fails\n"
             "import mirrorline.testing, mirrorline.testing.plugin_kit\nprint('ok')")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.stdout.strip() == "ok", result.stderr
