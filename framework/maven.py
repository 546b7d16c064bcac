"""Maven Central artifacts, resolved once into a cache shared by every process and session.

One job: turn a generated ``pom.xml`` into a directory of jars with the machine's Maven
(``dependency:copy-dependencies``), under ``<cache>/<name>/libs``, with a marker file recording a
complete download and a file lock so that concurrent processes download once. The dev clusters
(:mod:`mirrorline.localkafka`: Kafka's broker and tool jars, Java MirrorMaker 2) and the Spark
backend (:mod:`mirrorline.spark`: Spark's Kafka connector) both resolve through it.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from pathlib import Path


class MavenError(RuntimeError):
    """Maven is missing or could not resolve the artifacts; the message says why and what to do."""


def default_cache_dir() -> Path:
    """Where downloaded jars live: ``$MIRRORLINE_CACHE`` or ``~/.cache/mirrorline``."""
    root = os.environ.get("MIRRORLINE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mirrorline"
    )
    return Path(root)


def require_tool(name: str, hint: str) -> str:
    """Return the path of executable ``name`` or raise a MavenError saying how to get it."""
    path = shutil.which(name)
    if path is None:
        raise MavenError(f"{name} was not found on PATH; {hint}")
    return path


def resolve_maven_classpath(name: str, pom: str, what: str, cache_dir: Path | None = None) -> Path:
    """Return ``<cache>/<name>/libs``, holding the runtime dependencies of ``pom``, downloaded once with Maven.

    ``what`` names the artifacts in errors. Raises MavenError naming the cause when Maven is
    missing or the download fails; a marker file records a complete download.
    """
    base = (cache_dir or default_cache_dir()) / name
    libs = base / "libs"
    marker = base / "complete"
    if marker.exists():
        return libs
    base.mkdir(parents=True, exist_ok=True)
    # Several clusters (or processes) may start at once; one downloads, the others wait.
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            _download(base, libs, pom, what)
    return libs


def _download(base: Path, libs: Path, pom: str, what: str) -> None:
    mvn = require_tool("mvn", f"it fetches {what} from Maven Central (Debian: apt-get install maven)")
    staging = base / "libs.partial"
    shutil.rmtree(staging, ignore_errors=True)
    (base / "pom.xml").write_text(pom)
    cmd = [mvn, "-B", "-q", "-f", str(base / "pom.xml"), "dependency:copy-dependencies",
           "-DincludeScope=runtime", f"-DoutputDirectory={staging}"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        output = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + "\n" + result.stderr)
        errors = [line for line in output.splitlines() if "ERROR" in line]
        reason = errors[0].replace("[ERROR]", "") if errors else (output.strip() or "no output")
        raise MavenError(
            f"could not download {what} from Maven Central: {reason.strip()}"
        )
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    (base / "complete").write_text(what + "\n")
