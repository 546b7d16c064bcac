"""Run a standalone worker inside a test's event loop, against real Kafka, and talk to its REST API."""

from __future__ import annotations

import re

import asyncio
import base64
import contextlib
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp


@contextlib.asynccontextmanager
async def running_standalone(worker_config: dict[str, str], connectors: list[dict[str, str]] = (),
                             timeout: float = 60.0) -> AsyncIterator[str]:
    """Start ``mirrorline standalone`` in-process; yields the REST base URL; stops it gracefully on exit.

    With ``"listeners": "https://127.0.0.1:0"`` (and the ``listeners.https.ssl.*`` settings) the
    URL is an https one.
    """
    from mirrorline.boot.standalone import run_standalone

    stop = asyncio.Event()
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def on_started(url: str) -> None:
        ready.set_result(url)

    config = {"listeners": "http://127.0.0.1:0", "offset.flush.interval.ms": "500", **worker_config}
    runner = asyncio.create_task(run_standalone(config, list(connectors), stop_event=stop, on_started=on_started))
    done, _ = await asyncio.wait([runner, ready], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    if runner in done:
        runner.result()  # raises the start-up error
    if ready not in done:
        stop.set()
        raise TimeoutError("standalone worker did not start in time")
    try:
        yield ready.result()
    finally:
        stop.set()
        await asyncio.wait_for(runner, timeout)


class Rest:
    """A tiny Kafka Connect REST client for tests: returns (status, JSON body or None).

    ``auth`` is a ``(user, password)`` pair sent as HTTP Basic credentials; ``ssl_context`` is
    used for https URLs (e.g. one trusting the test CA, with a client certificate loaded).
    """

    def __init__(self, base_url: str, *, auth: tuple[str, str] | None = None,
                 ssl_context: ssl.SSLContext | None = None):
        self.base_url = base_url.rstrip("/")
        headers = {}
        if auth is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        connector = aiohttp.TCPConnector(ssl=ssl_context) if ssl_context is not None else None
        self._session = aiohttp.ClientSession(headers=headers, connector=connector)

    async def close(self) -> None:
        """Close the HTTP session."""
        await self._session.close()

    async def __aenter__(self) -> Rest:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def call(self, method: str, path: str, body: Any = None, raw: str | None = None,
                   headers: dict[str, str] | None = None) -> tuple[int, Any]:
        """Send a request; ``raw`` sends a literal body (e.g. malformed JSON); ``headers`` are added."""
        kwargs: dict[str, Any] = {}
        if raw is not None:
            kwargs = {"data": raw, "headers": {"Content-Type": "application/json"}}
        elif body is not None:
            kwargs = {"json": body}
        if headers:
            kwargs["headers"] = {**kwargs.get("headers", {}), **headers}
        async with self._session.request(method, self.base_url + path, **kwargs) as response:
            text = await response.text()
            try:
                data = await response.json(content_type=None) if text else None
            except ValueError:
                data = text
            return response.status, data

    async def wait_for(self, path: str, predicate, timeout: float = 30.0, interval: float = 0.2) -> Any:
        """Poll ``GET path`` until ``predicate(body)`` is true; returns the body or raises TimeoutError."""
        deadline = asyncio.get_running_loop().time() + timeout
        body = None
        while asyncio.get_running_loop().time() < deadline:
            status, body = await self.call("GET", path)
            if status == 200 and predicate(body):
                return body
            await asyncio.sleep(interval)
        raise TimeoutError(f"GET {path} never satisfied the condition; last body: {body}")


def all_running(expected_tasks: int):
    """Predicate for ``Rest.wait_for`` on a status: connector and ``expected_tasks`` tasks RUNNING."""
    def check(status: dict) -> bool:
        return (status["connector"]["state"] == "RUNNING" and len(status["tasks"]) == expected_tasks
                and all(t["state"] == "RUNNING" for t in status["tasks"]))
    return check


def metric_value(text: str, name: str, **labels: str) -> float:
    """The value of the series ``name`` whose labels include ``labels`` (0 when there is none)."""
    for line in text.splitlines():
        match = re.match(r"^(\w+)\{(.*)\} (\S+)$", line)
        if match and match.group(1) == name:
            found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
            if all(found.get(k) == v for k, v in labels.items()):
                return float(match.group(3))
    return 0.0
