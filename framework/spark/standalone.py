"""A Spark standalone cluster (one master, N workers) on loopback, started from the pyspark package.

The pip package has no ``sbin/start-master.sh``; its ``bin/spark-class`` runs the master and the
workers directly (what the scripts do)::

    SPARK_HOME=$(python -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))')
    SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=.venv/bin/python \\
      $SPARK_HOME/bin/spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port 7077
    ... spark-class org.apache.spark.deploy.worker.Worker spark://127.0.0.1:7077 --host 127.0.0.1 --cores 1

Used by the tests, the benchmark and ``docs/backfill.md``; a production cluster is started by
its operators. :meth:`StandaloneCluster.stop` ends only the processes it started.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from mirrorline.spark.errors import SparkUnavailable
from mirrorline.spark.session import check_java, import_pyspark


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class StandaloneCluster:
    """A master and ``workers`` workers (``cores`` each) on 127.0.0.1, logs under ``log_dir``."""

    def __init__(self, log_dir: Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
        self.log_dir = Path(log_dir)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.ui_port = free_port()
        self.processes: list[subprocess.Popen] = []

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:<port>``, the value for ``spark.master``."""
        return f"spark://127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str:
        """The master's web UI."""
        return f"http://127.0.0.1:{self.ui_port}"

    def environment(self) -> dict[str, str]:
        """The environment the master, workers and their executors run with."""
        spark_home = str(Path(import_pyspark().__file__).parent)
        return {**os.environ, "SPARK_HOME": spark_home, "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable, "SPARK_WORKER_DIR": str(self.log_dir / "work"),
                "SPARK_NO_DAEMONIZE": "1"}

    def _spawn(self, name: str, *args: str) -> None:
        env = self.environment()
        log = open(self.log_dir / f"{name}.log", "wb")
        try:
            self.processes.append(subprocess.Popen(
                [os.path.join(env["SPARK_HOME"], "bin", "spark-class"), *args], env=env,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        finally:
            log.close()

    def start(self, timeout: float = 90.0) -> StandaloneCluster:
        """Start the master, then the workers; return once every worker has registered."""
        check_java()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))
        for i in range(self.workers):
            self._spawn(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", self.master_url,
                        "--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
                        "--webui-port", str(free_port()))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.alive_workers() >= self.workers:
                return self
            dead = [p for p in self.processes if p.poll() is not None]
            if dead:
                self.stop()
                raise SparkUnavailable(f"a Spark standalone process exited at start-up; see {self.log_dir}")
            time.sleep(0.5)
        self.stop()
        raise SparkUnavailable(f"Spark standalone cluster did not register {self.workers} worker(s) within "
                               f"{timeout:.0f} s; see {self.log_dir}")

    def alive_workers(self) -> int:
        """Workers the master reports ALIVE (0 while it does not answer)."""
        import json

        try:
            with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=2) as response:
                state = json.load(response)
        except (OSError, ValueError):
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def stop(self) -> None:
        """Stop the workers, then the master (SIGTERM, SIGKILL after 10 s); only processes started here."""
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()
