"""A small HTTP server for processes whose workers serve no REST API (``mirrorline mm2``).

It answers what probes and Prometheus need and nothing else:

- ``GET /health``: ``{"status", "message", "workers": {id: {"status", "message"}}}``. The
  status is the worst of every worker's herder health (``healthy`` < ``starting`` <
  ``unhealthy``), and the HTTP status follows the REST API's ``/health``: 200 healthy, 503
  starting, 500 unhealthy. A worker that has not started yet counts as ``starting``, so the
  process is healthy only once every worker (every MM2 flow) has joined its group and holds
  an assignment;
- ``GET /metrics``: every metric of this process in Prometheus text format;
- ``GET /``: ``{"version", "workers"}``, answered whenever the process runs (for liveness).
"""

from __future__ import annotations

import logging

from aiohttp import web

from mirrorline import __version__
from mirrorline.rest.routes_worker import HEALTH_STATUS
from mirrorline.runtime.herder import Herder
from mirrorline.boot.process import Listener, _listen_error

log = logging.getLogger(__name__)

_SEVERITY = {"healthy": 0, "starting": 1, "unhealthy": 2}


class HealthServer:
    """Serves ``/health``, ``/metrics`` and ``/`` for a fixed list of workers.

    ``worker_ids`` are every worker the process will run, in order; :meth:`add` registers each
    one's herder once it has started.
    """

    def __init__(self, worker_ids: list[str], *, shutdown_timeout: float = 2.0) -> None:
        """Nothing listens until :meth:`start`."""
        self.worker_ids = list(worker_ids)
        self._herders: dict[str, Herder] = {}
        self._shutdown_timeout = shutdown_timeout
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self.app = web.Application()
        self.app.add_routes([web.get("/", self._root), web.get("/health", self._health),
                             web.get("/metrics", self._metrics)])

    def add(self, worker_id: str, herder: Herder) -> None:
        """Report ``herder``'s health for ``worker_id`` from now on."""
        self._herders[worker_id] = herder

    async def health(self) -> tuple[str, str, dict[str, dict[str, str]]]:
        """``(status, message, per-worker {"status", "message"})`` of the whole process."""
        workers: dict[str, dict[str, str]] = {}
        for worker_id in self.worker_ids:
            herder = self._herders.get(worker_id)
            if herder is None:
                status, message = "starting", "Worker has not started yet."
            else:
                try:
                    status, message = await herder.health()
                except Exception as exc:  # noqa: BLE001 - a failing check is an unhealthy worker, not a 500 page
                    status, message = "unhealthy", f"Health check failed: {exc!r}"
            workers[worker_id] = {"status": status, "message": message}
        if not workers:
            return "healthy", "No workers to run.", workers
        worst = max(workers.values(), key=lambda w: _SEVERITY.get(w["status"], 2))["status"]
        if worst == "healthy":
            return "healthy", f"All {len(workers)} worker(s) have joined their groups and hold an assignment.", workers
        pending = [f"{wid}: {w['message']}" for wid, w in workers.items() if w["status"] != "healthy"]
        return worst, "Not ready: " + " ".join(pending), workers

    async def _health(self, request: web.Request) -> web.Response:
        status, message, workers = await self.health()
        return web.json_response({"status": status, "message": message, "workers": workers},
                                 status=HEALTH_STATUS.get(status, 500))

    async def _root(self, request: web.Request) -> web.Response:
        return web.json_response({"version": __version__, "workers": self.worker_ids})

    async def _metrics(self, request: web.Request) -> web.Response:
        from mirrorline.runtime.metrics import exposition

        body, content_type = await exposition()
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def start(self, listener: Listener) -> None:
        """Listen on ``listener``; a port that cannot be bound is a one-line ConnectError."""
        runner = web.AppRunner(self.app, handle_signals=False, access_log=None,
                               shutdown_timeout=self._shutdown_timeout)
        await runner.setup()
        try:
            await web.TCPSite(runner, listener.host or "0.0.0.0", listener.port).start()
        except OSError as exc:
            await runner.cleanup()
            raise _listen_error(listener, exc) from None
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        log.info("Serving /health and /metrics on %s:%d", listener.host or "0.0.0.0", self.port)

    async def stop(self) -> None:
        """Stop listening (idempotent)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
