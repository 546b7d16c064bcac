"""deploy/container: the Dockerfile's shape, and the entrypoint's environment-to-properties mapping.

No container engine is needed: the Dockerfile is parsed as text, and entrypoint.sh runs with
bash in ``--print-config`` mode, which stops before starting mirrorline.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from mirrorline.clients.configfile import parse_properties

ROOT = Path(__file__).resolve().parents[2]
CONTAINER = ROOT / "deploy" / "container"
ENTRYPOINT = CONTAINER / "entrypoint.sh"

#: Docker's predefined build arguments, usable without an ARG line.
PREDEFINED_ARGS = {"HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "ALL_PROXY",
                   "http_proxy", "https_proxy", "ftp_proxy", "no_proxy", "all_proxy"}
#: Variables the base image's environment provides.
BASE_IMAGE_ENV = {"PATH"}
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|([A-Za-z_][A-Za-z0-9_]*))")


def instructions(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` per instruction, continuation lines joined, comments dropped."""
    result, pending = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # comment lines inside a continued instruction are dropped by Docker too
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, rest = full.partition(" ")
        result.append((keyword.upper(), rest.strip()))
    assert not pending, "Dockerfile ends inside a continued instruction"
    return result


def exec_form(arguments: str) -> list[str]:
    assert arguments.startswith("["), f"not exec form: {arguments}"
    return json.loads(arguments)


def declared_names(arguments: str) -> list[str]:
    """Names an ARG or ENV line declares (``A=1 B=2``, ``A``, or ENV's legacy ``A value``)."""
    words = shlex.split(arguments)
    if words and "=" not in words[0] and len(words) > 1:
        return [words[0]]
    return [word.split("=", 1)[0] for word in words]


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return instructions((CONTAINER / "Dockerfile").read_text(encoding="utf-8"))


def stages(dockerfile):
    """The global instructions (before the first FROM), then one list per stage, FROM first."""
    result = [[]]
    for keyword, arguments in dockerfile:
        if keyword == "FROM":
            result.append([])
        result[-1].append((keyword, arguments))
    return result[0], result[1:]


def test_is_multi_stage_from_a_slim_python_base(dockerfile):
    global_part, stage_list = stages(dockerfile)
    assert len(stage_list) >= 2
    assert all(" AS " in arguments.upper() for keyword, arguments in (s[0] for s in stage_list))
    defaults = dict(arg.split("=", 1) for k, a in global_part if k == "ARG" for arg in shlex.split(a) if "=" in arg)
    base = defaults["BASE_IMAGE"].replace("${PYTHON_VERSION}", defaults["PYTHON_VERSION"])
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", base), base
    assert [stage[0][1].split()[0] for stage in stage_list] == ["${BASE_IMAGE}"] * len(stage_list), \
        "every stage starts from the same base"
    runtime = stage_list[-1]
    assert any(k == "COPY" and a.startswith("--from=") for k, a in runtime), "the runtime stage copies the venv"


def test_runs_as_a_non_root_user_with_mirrorline_as_entrypoint(dockerfile):
    _, stage_list = stages(dockerfile)
    runtime = stage_list[-1]
    users = [a for k, a in runtime if k == "USER"]
    assert users, "the runtime stage sets USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), users[-1]
    assert user == "10001"
    entrypoint = exec_form([a for k, a in runtime if k == "ENTRYPOINT"][-1])
    assert entrypoint[-1] == "/usr/local/bin/mirrorline-entrypoint"
    copied = [a.split() for k, a in runtime if k == "COPY"]
    assert ["deploy/container/entrypoint.sh", entrypoint[-1]] in copied
    assert any(k == "WORKDIR" for k, _ in runtime)
    assert ("EXPOSE", "8083") in runtime


def test_everything_it_copies_exists_and_is_not_dockerignored(dockerfile):
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8")
    sources = []
    for keyword, arguments in dockerfile:
        if keyword == "COPY" and not arguments.startswith("--from="):
            *srcs, _dest = arguments.split()
            sources += srcs
    assert "deploy/container/requirements*.txt" in sources
    for source in sources:
        matches = list(ROOT.glob(source))
        assert matches, f"COPY {source}: nothing in the repository matches"
        top = source.split("/")[0]
        assert f"!{top}" in ignored or f"!{top}/" in ignored or f"!{source.rsplit('/', 1)[0]}/" in ignored, \
            f"COPY {source}: excluded by .dockerignore"
    for script in ("build-venv", "entrypoint.sh", "lock-requirements"):
        assert os.access(CONTAINER / script, os.X_OK), f"{script} is not executable"


def test_every_variable_is_a_declared_arg_or_env(dockerfile):
    global_part, stage_list = stages(dockerfile)
    global_args = {n for k, a in global_part if k == "ARG" for n in declared_names(a)}
    all_args = global_args | {n for k, a in dockerfile if k == "ARG" for n in declared_names(a)}
    for keyword, arguments in global_part:
        for name in (m.group(1) or m.group(2) for m in _VAR.finditer(arguments)):
            assert name in global_args | PREDEFINED_ARGS, f"{keyword} {arguments}: ${name} is not declared before it"
    for stage in stage_list:
        for name in (m.group(1) or m.group(2) for m in _VAR.finditer(stage[0][1])):
            assert name in global_args, f"FROM uses ${name}, which is not a global ARG"
        known = set(PREDEFINED_ARGS) | BASE_IMAGE_ENV
        for keyword, arguments in stage[1:]:
            for name in (m.group(1) or m.group(2) for m in _VAR.finditer(arguments)):
                # RUN is expanded by the shell: only names that are build arguments somewhere are
                # checked there (a global ARG is empty inside a stage unless re-declared).
                if keyword == "RUN" and name not in all_args:
                    continue
                assert name in known, f"{keyword} {arguments[:60]}...: ${name} is not declared in this stage"
            if keyword in ("ARG", "ENV"):
                known.update(declared_names(arguments))


def test_a_lock_file_per_extras_variant_locked_for_the_base_python(dockerfile):
    python = next(a.split("=", 1)[1] for k, a in dockerfile if k == "ARG" and a.startswith("PYTHON_VERSION="))
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for name in ("requirements.txt", "requirements-spark.txt", "requirements-faust.txt",
                 "requirements-faust-spark.txt"):
        text = (CONTAINER / name).read_text(encoding="utf-8")
        assert f"pip-compile with Python {python}" in text, name
        pins = re.findall(r"^([a-z0-9][a-z0-9._-]*)==", text, re.MULTILINE)
        assert {"aiokafka", "aiohttp", "pluggy", "pyyaml", "prometheus-client"} <= set(pins), name
        assert "--hash=sha256:" in text and "--find-links" not in text and "--index-url" not in text, name
    assert "pyspark==" in (CONTAINER / "requirements-spark.txt").read_text(encoding="utf-8")
    assert "faust-streaming==" in (CONTAINER / "requirements-faust.txt").read_text(encoding="utf-8")
    assert "pyspark" in pyproject and "faust-streaming" in pyproject


def print_config(*args: str, env: dict[str, str] | None = None, run_dir: Path) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MIRRORLINE_")}
    clean.update(env or {}, MIRRORLINE_RUN_DIR=str(run_dir))
    return subprocess.run(["bash", str(ENTRYPOINT), "--print-config", *args], env=clean,
                          capture_output=True, text=True, timeout=30)


def test_entrypoint_turns_worker_variables_into_properties(tmp_path):
    base = tmp_path / "worker.properties"
    base.write_text("bootstrap.servers = from-file:9092\nlisteners = http://0.0.0.0:8083\n")
    env = {"MIRRORLINE_CONFIG": str(base),
           "MIRRORLINE_WORKER_BOOTSTRAP_SERVERS": "kafka-0:9092,kafka-1:9092",
           "MIRRORLINE_WORKER_OFFSET_STORAGE_FILE_FILENAME": r"C:\offsets file",
           "MIRRORLINE_WORKER_PRODUCER_SASL_JAAS_CONFIG": 'x required username="u" password="p";',
           "MIRRORLINE_WORKER_MY__UNDERSCORED___DASHED": "  two lines\nhere",
           "MIRRORLINE_LOG_LEVEL": "DEBUG"}
    done = print_config("standalone", "/etc/mirrorline/connectors/mirror.json", env=env, run_dir=tmp_path / "run")
    assert done.returncode == 0, done.stderr
    generated = tmp_path / "run" / "worker.properties"
    assert done.stdout.splitlines()[0] == (
        f"# mirrorline --log-level DEBUG standalone {generated} /etc/mirrorline/connectors/mirror.json")
    props = parse_properties(generated.read_text())
    assert props == {"bootstrap.servers": "kafka-0:9092,kafka-1:9092",  # the variable overrides the file
                     "listeners": "http://0.0.0.0:8083",
                     "offset.storage.file.filename": r"C:\offsets file",
                     "producer.sasl.jaas.config": 'x required username="u" password="p";',
                     "my_underscored-dashed": "  two lines\nhere"}
    assert generated.stat().st_mode & 0o077 == 0, "the generated file may hold secrets: owner-only"


def test_entrypoint_passes_arguments_through_without_variables(tmp_path):
    done = print_config("--log-level", "INFO", "distributed", "/etc/mirrorline/worker.properties", run_dir=tmp_path)
    assert done.stdout == "# mirrorline --log-level INFO distributed /etc/mirrorline/worker.properties\n"
    done = print_config("mm2", "--clusters", "dr", env={"MIRRORLINE_CONFIG": "/etc/mirrorline/mm2.properties"},
                        run_dir=tmp_path)
    assert done.stdout == "# mirrorline mm2 /etc/mirrorline/mm2.properties --clusters dr\n"
    done = print_config("plugins", env={"MIRRORLINE_WORKER_GROUP_ID": "g"}, run_dir=tmp_path)
    assert done.stdout == "# mirrorline plugins\n"
    assert not (tmp_path / "worker.properties").exists()


@pytest.mark.parametrize("args, env, message", [
    (["mm2"], {"MIRRORLINE_WORKER_GROUP_ID": "g"}, "MIRRORLINE_WORKER_* apply to standalone and distributed"),
    (["distributed"], {"MIRRORLINE_WORKER_GROUP_ID": "g", "MIRRORLINE_CONFIG": "/nonexistent.properties"},
     "MIRRORLINE_CONFIG=/nonexistent.properties is not a readable file"),
    (["distributed"], {"MIRRORLINE_WORKER_GROUP_ID": "g", "MIRRORLINE_CONFIG": "{yaml}"},
     "extend a .properties file"),
])
def test_entrypoint_refuses_what_it_cannot_honour(tmp_path, args, env, message):
    yaml_file = tmp_path / "worker.yaml"
    yaml_file.write_text("group.id: g\n")
    env = {k: v.format(yaml=yaml_file) for k, v in env.items()}
    done = print_config(*args, env=env, run_dir=tmp_path / "run")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("mirrorline-entrypoint: error: ") and message in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1
