"""mirrorline processes run on uvloop where installed; MIRRORLINE_EVENT_LOOP picks (see mirrorline.boot.event_loop)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from mirrorline.api.errors import ConfigError
from mirrorline.boot import event_loop

uvloop = pytest.importorskip("uvloop", reason="uvloop is a dependency wherever it builds")


def test_uvloop_by_default_and_asyncio_on_request():
    assert event_loop.chosen_loop({}) == "uvloop"
    assert event_loop.chosen_loop({"MIRRORLINE_EVENT_LOOP": " AsyncIO "}) == "asyncio"
    assert event_loop.chosen_loop({"MIRRORLINE_EVENT_LOOP": "uvloop"}) == "uvloop"


def test_run_returns_the_coroutines_result_on_the_chosen_loop():
    async def loop_type():
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop())

    assert event_loop.run(loop_type(), {}) is uvloop.Loop
    assert event_loop.run(loop_type(), {"MIRRORLINE_EVENT_LOOP": "asyncio"}) is not uvloop.Loop
    loop = event_loop.new_event_loop({})
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_an_unknown_loop_is_a_config_error_and_the_coroutine_is_closed():
    async def never():
        raise AssertionError("must not run")

    coro = never()
    with pytest.raises(ConfigError, match="MIRRORLINE_EVENT_LOOP='trio' is not one of uvloop, asyncio"):
        event_loop.run(coro, {"MIRRORLINE_EVENT_LOOP": "trio"})
    assert coro.cr_frame is None  # closed, not left to warn "never awaited"


def test_uvloop_asked_for_but_missing_says_what_to_do(monkeypatch):
    monkeypatch.setattr(event_loop, "uvloop_installed", lambda: False)
    assert event_loop.chosen_loop({}) == "asyncio"
    with pytest.raises(ConfigError, match="uvloop is not installed.*MIRRORLINE_EVENT_LOOP=asyncio"):
        event_loop.chosen_loop({"MIRRORLINE_EVENT_LOOP": "uvloop"})


def _command(env_value: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MIRRORLINE_EVENT_LOOP"}
    if env_value is not None:
        env["MIRRORLINE_EVENT_LOOP"] = env_value
    # a command that runs an event loop and ends at once: nothing listens on port 1
    return subprocess.run([sys.executable, "-m", "mirrorline.cli.main", "--log-level", "DEBUG", "jobs", "list",
                           "--url", "http://127.0.0.1:1"], env=env, capture_output=True, text=True, timeout=120)


def test_the_command_line_runs_on_uvloop_and_reports_a_bad_choice_in_one_line():
    done = _command(None)
    assert "event loop: uvloop.Loop" in done.stderr, done.stderr
    assert "cannot reach the worker at http://127.0.0.1:1" in done.stderr.strip().splitlines()[-1]
    done = _command("asyncio")
    assert "event loop: asyncio" in done.stderr and "uvloop.Loop" not in done.stderr, done.stderr
    done = _command("trio")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(
        "mirrorline: error: MIRRORLINE_EVENT_LOOP='trio' is not one of uvloop, asyncio"), done.stderr
