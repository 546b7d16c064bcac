"""The container image's layers, built without a container engine.

deploy/container/Dockerfile builds its venv with ``build-venv deps`` (the pinned, hashed
requirements.txt) and ``build-venv app`` (mirrorline's wheel with ``--no-deps``); this test runs
the same script on a copy of what the Dockerfile COPYs into a fresh venv, then runs the installed
``mirrorline`` and the image's entrypoint as the container would. It installs from PyPI (pip's
cache makes re-runs quicker) but needs no Kafka.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CONTAINER = ROOT / "deploy" / "container"
#: What the Dockerfile's build stage copies to /src.
SOURCES = ["pyproject.toml", "setup.py", "README.md", "framework", "connectors"]


def run(args, *, env=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def image_venv(tmp_path_factory) -> Path:
    """A venv built as the image builds /opt/mirrorline; the default variant (EXTRAS="")."""
    work = tmp_path_factory.mktemp("image")
    src = work / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, src / name)
    venv = work / "venv"
    # the interpreter this suite runs on; build-venv refuses one the lock file was not made for
    env = {**os.environ, "PYTHON": sys.executable}
    for step in (["deps", venv, ""], ["app", venv, src, ""]):
        done = run([CONTAINER / "build-venv", *step], env=env)
        assert done.returncode == 0, f"build-venv {step[0]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return venv


def container_env(venv: Path, **extra: str) -> dict[str, str]:
    """The runtime stage's environment: the venv first on PATH, no MIRRORLINE_* from outside."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MIRRORLINE_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONUNBUFFERED="1", **extra)
    return env


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_installed_set_is_exactly_the_lock_file_and_mirrorline(image_venv):
    done = run([image_venv / "bin" / "python", "-m", "pip", "list", "--format=json"], env=container_env(image_venv))
    installed = {(canonical(d["name"]), d["version"]) for d in json.loads(done.stdout)}
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    lock = (CONTAINER / "requirements.txt").read_text(encoding="utf-8")
    locked = {(canonical(name), version) for name, version in re.findall(r"^(\S+)==(\S+)", lock, re.MULTILINE)}
    assert {(n, v) for n, v in installed if n not in ("pip", "setuptools")} == locked | {("mirrorline", version)}


def test_installed_mirrorline_runs_and_finds_the_mm2_plugins(image_venv):
    env = container_env(image_venv)
    mirrorline = image_venv / "bin" / "mirrorline"
    done = run([mirrorline, "--help"], env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    for command in ("standalone", "distributed", "mm2", "plugins"):
        assert command in done.stdout
    done = run([mirrorline, "plugins"], env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    for plugin in ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector"):
        assert f".{plugin} " in done.stdout, done.stdout
    # a clean venv: the repository's test plugins are not installed there
    assert "SequenceSource" not in done.stdout


def test_entrypoint_generates_worker_properties_from_the_environment(image_venv, tmp_path):
    env = container_env(image_venv, MIRRORLINE_RUN_DIR=str(tmp_path),
                        MIRRORLINE_WORKER_BOOTSTRAP_SERVERS="kafka-0.example.invalid:9092",
                        MIRRORLINE_WORKER_GROUP_ID="mirrorline-cluster")
    done = run([CONTAINER / "entrypoint.sh", "--print-config", "distributed"], env=env, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"# mirrorline distributed {tmp_path / 'worker.properties'}",
        "# from MIRRORLINE_WORKER_* environment variables",
        "bootstrap.servers=kafka-0.example.invalid:9092",
        "group.id=mirrorline-cluster",
    ]


def test_entrypoint_runs_mirrorline_with_the_generated_config(image_venv, tmp_path):
    """A real start against a broker that is not there: the one-line error names the variable's bootstrap."""
    base = tmp_path / "worker.properties"
    base.write_text("bootstrap.servers=from-the-file:9092\nlisteners=http://127.0.0.1:0\n")
    env = container_env(image_venv, MIRRORLINE_RUN_DIR=str(tmp_path / "run"), MIRRORLINE_CONFIG=str(base),
                        MIRRORLINE_WORKER_BOOTSTRAP_SERVERS="127.0.0.1:1",
                        MIRRORLINE_WORKER_OFFSET_STORAGE_FILE_FILENAME=str(tmp_path / "offsets.json"))
    done = run([CONTAINER / "entrypoint.sh", "standalone"], env=env, timeout=60)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("mirrorline: error: cannot reach Kafka at bootstrap.servers=127.0.0.1:1"), done.stderr
    assert "Traceback" not in done.stderr
