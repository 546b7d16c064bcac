"""Every ``mirrorline`` failure is exit code 1 and one readable line on stderr (no Kafka needed).

"Broker down" is a loopback port nothing listens on; "port taken" is a socket this test holds.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys

import pytest

from mirrorline.api.errors import ConnectError
from mirrorline.cli import main as cli
from mirrorline.boot.process import Listener, check_listener_free, serve


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirrorline.cli.main", *args], capture_output=True, text=True,
                          timeout=120)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The single stderr line of a failed command (asserting there is exactly one)."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("mirrorline: error: ")
    return lines[0]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def taken_port():
    """A loopback port another socket listens on for the whole test."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.mark.parametrize("command", [["offsets", "translate"], ["failover", "--dry-run"]])
def test_failover_tools_with_the_broker_down(command):
    bootstrap = f"127.0.0.1:{free_port()}"
    line = one_error_line(run_cli(*command, "--group", "g", "--source", "A", "--target-bootstrap", bootstrap))
    assert f"cannot reach the target cluster at {bootstrap}" in line and "--target-bootstrap" in line


def test_standalone_with_its_rest_port_taken(tmp_path, taken_port):
    (tmp_path / "w.properties").write_text(f"bootstrap.servers=127.0.0.1:{free_port()}\n"
                                           f"listeners=http://127.0.0.1:{taken_port}\n")
    line = one_error_line(run_cli("standalone", str(tmp_path / "w.properties")))
    assert f"cannot serve the REST API on 127.0.0.1:{taken_port} (listeners)" in line
    assert "in use" in line and "free port" in line


def test_distributed_with_its_rest_port_taken(tmp_path, taken_port):
    (tmp_path / "d.properties").write_text(
        f"bootstrap.servers=127.0.0.1:{free_port()}\nlisteners=http://127.0.0.1:{taken_port}\ngroup.id=g\n"
        "config.storage.topic=c\noffset.storage.topic=o\nstatus.storage.topic=s\n")
    result = run_cli("distributed", str(tmp_path / "d.properties"))
    assert f"cannot serve the REST API on 127.0.0.1:{taken_port}" in one_error_line(result)


def mm2_file(tmp_path, extra: str) -> str:
    path = tmp_path / "mm2.properties"
    path.write_text(f"clusters = A, B\nA.bootstrap.servers = 127.0.0.1:{free_port()}\n"
                    f"B.bootstrap.servers = 127.0.0.1:{free_port()}\nA->B.enabled = true\n{extra}\n")
    return str(path)


def test_mm2_with_a_bad_regex_opens_no_client(tmp_path):
    result = run_cli("mm2", mm2_file(tmp_path, "topics = ["))
    line = one_error_line(result)
    assert "Invalid value [ for configuration topics: invalid regular expression" in line
    assert "Unclosed" not in result.stderr


def test_mm2_with_an_empty_separator(tmp_path):
    line = one_error_line(run_cli("mm2", mm2_file(tmp_path, "replication.policy.separator =")))
    assert "configuration replication.policy.separator: must not be empty" in line


def test_missing_config_file():
    line = one_error_line(run_cli("standalone", "/nonexistent/worker.properties"))
    assert "cannot read config file /nonexistent/worker.properties" in line


def test_a_bug_is_one_line_and_its_traceback_on_request(monkeypatch, capsys):
    def broken(args):
        raise KeyError("surprise")

    monkeypatch.setattr("mirrorline.cli.plugins._run", broken)
    monkeypatch.setattr(logging.getLogger(), "level", logging.getLogger().level)  # main() may reconfigure it
    assert cli.main(["plugins"]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["mirrorline: error: unexpected KeyError: 'surprise' "
                                        "(run with --log-level DEBUG for the traceback)"]
    assert cli.main(["--log-level", "debug", "plugins"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1] == "mirrorline: error: unexpected KeyError: 'surprise'"


def test_multi_line_messages_are_folded():
    assert cli.one_line(ConnectError("invalid:\n a: x\n\n b: y\n")) == "invalid: a: x b: y"


def test_listener_check(taken_port):
    with pytest.raises(ConnectError, match="Address already in use"):
        check_listener_free(Listener("127.0.0.1", taken_port))
    check_listener_free(Listener("127.0.0.1", 0))
    check_listener_free(Listener("127.0.0.1", free_port()))


async def test_serve_reports_a_port_taken_after_the_check(taken_port):
    class NeverStarted:
        """serve must not touch a herder when it cannot listen."""

        def __getattr__(self, name):
            raise AssertionError(f"herder.{name} used")

    with pytest.raises(ConnectError, match=f"cannot serve the REST API on 127.0.0.1:{taken_port}"):
        await serve(NeverStarted(), Listener("127.0.0.1", taken_port), stop_event=asyncio.Event())
