"""``mirrorline jobs list|status|submit|cancel --url http://worker:8083``: a worker cluster's bulk jobs over REST.

- ``list``: every job with its state, progress, rate and ETA (``--json`` for the raw answer);
- ``status NAME``: one job's info as JSON (exit status 1 when it FAILED);
- ``submit NAME --class JOB_CLASS [--connector NAME] [--set KEY=VALUE ...] [--wait]``: ``POST /jobs``,
  then, with ``--wait``, poll until it finishes (exit status 1 unless it SUCCEEDED);
- ``cancel NAME``: ``DELETE /jobs/{name}`` (a running job is cancelled; a finished one is removed
  and its result printed).

``--user`` (password in ``$MIRRORLINE_REST_PASSWORD``) and ``--cacert`` reach workers that
authenticate or speak https. Errors are one line and exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import time
from typing import Any
from urllib.parse import quote

import aiohttp

from mirrorline.api.errors import ConfigError, ConnectError

PASSWORD_ENV = "MIRRORLINE_REST_PASSWORD"
REST_TIMEOUT_S = 120.0
#: Seconds between two looks at a job ``submit --wait`` waits for.
WAIT_EVERY_S = 2.0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``jobs`` subcommand."""
    parser = sub.add_parser("jobs", help="list, inspect, submit and cancel a worker cluster's bulk jobs (REST)")
    actions = parser.add_subparsers(dest="jobs_action", metavar="ACTION", required=True)
    for name, help_text in (("list", "every job: state, progress, rate, ETA"),
                            ("status", "one job's state, progress, Spark UI and result, as JSON"),
                            ("submit", "submit a job (POST /jobs)"),
                            ("cancel", "cancel a running job, or remove a finished one (DELETE /jobs/NAME)")):
        action = actions.add_parser(name, help=help_text)
        action.add_argument("--url", required=True, help="a worker's REST URL, e.g. http://localhost:8083")
        action.add_argument("--user", help=f"Basic-auth user (password from ${PASSWORD_ENV})")
        action.add_argument("--cacert", help="CA certificate file (PEM) to trust for an https worker")
        if name != "list":
            action.add_argument("name", metavar="NAME", help="the job's name")
        else:
            action.add_argument("--json", action="store_true", help="print the answer as JSON")
        if name == "submit":
            action.add_argument("--class", dest="job_class", required=True, help="job.class: backfill, mm2-reconcile ...")
            action.add_argument("--connector", help="the connector the job takes its settings from")
            action.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                                help="a job setting (repeatable), e.g. backfill.topics=orders.*")
            action.add_argument("--wait", action="store_true", help="wait for the job to finish")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from mirrorline.boot import event_loop

    return event_loop.run(_main(args))


async def _main(args: argparse.Namespace) -> int:
    if args.jobs_action == "list":
        jobs = await call(args, "GET", "/jobs?expand=status")
        if args.json:
            print(json.dumps(jobs, indent=2))
        else:
            print(format_list({name: entry["status"] for name, entry in (jobs or {}).items()}))
        return 0
    path = "/jobs/" + quote(args.name, safe="")
    if args.jobs_action == "status":
        info = await call(args, "GET", path)
        print(json.dumps(info, indent=2))
        return 1 if info.get("state") == "FAILED" else 0
    if args.jobs_action == "cancel":
        print(json.dumps(await call(args, "DELETE", path), indent=2))
        return 0
    config = {"job.class": args.job_class}
    if args.connector:
        config["connector"] = args.connector
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        config[key.strip()] = value
    info = await call(args, "POST", "/jobs", {"name": args.name, "config": config})
    if not args.wait:
        print(json.dumps(info, indent=2))
        return 0
    while info.get("state") not in ("SUCCEEDED", "FAILED", "CANCELLED"):
        await asyncio.sleep(WAIT_EVERY_S)
        info = await call(args, "GET", path)
    print(json.dumps(info, indent=2))
    return 0 if info["state"] == "SUCCEEDED" else 1


def format_list(jobs: dict[str, dict[str, Any]]) -> str:
    """One line per job: name, state, progress bar and percentage, rate, ETA, worker."""
    if not jobs:
        return "no jobs"
    lines = [f"{'job':<28} {'state':<10} {'progress':<28} {'rate/s':>10} {'eta':>8}  worker"]
    for name, info in sorted(jobs.items()):
        progress = info.get("progress") or {}
        percent = progress.get("percent")
        bar = "" if percent is None else "[" + "#" * int(percent // 5) + "." * (20 - int(percent // 5)) + \
            f"] {percent:5.1f}%"
        rate = info.get("records_per_second")
        eta = info.get("eta_seconds")
        lines.append(f"{name:<28} {info.get('state', ''):<10} {bar:<28} "
                     f"{'' if rate is None else format(rate, ',.0f'):>10} {'' if eta is None else f'{eta:.0f}s':>8}  "
                     f"{info.get('worker_id') or ''}")
    return "\n".join(lines)


async def call(args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    """One REST call; its JSON answer, or ConnectError with the worker's message."""
    auth = None
    if args.user:
        password = os.environ.get(PASSWORD_ENV)
        if password is None:
            raise ConfigError(f"--user {args.user}: set the password in the environment variable {PASSWORD_ENV}")
        auth = aiohttp.BasicAuth(args.user, password)
    kwargs: dict[str, Any] = {"auth": auth}
    if body is not None:
        kwargs["json"] = body
    if args.cacert:
        try:
            kwargs["ssl"] = ssl.create_default_context(cafile=args.cacert)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"--cacert {args.cacert}: cannot read it ({exc})") from None
    url = args.url.rstrip("/") + path
    started = time.monotonic()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REST_TIMEOUT_S)) as session:
            async with session.request(method, url, **kwargs) as response:
                text, status = await response.text(), response.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ConnectError(f"cannot reach the worker at {args.url} after {time.monotonic() - started:.0f} s: "
                           f"{str(exc) or type(exc).__name__}") from None
    try:
        data = json.loads(text) if text.strip() else None
    except ValueError:
        data = None
    if status >= 400:
        message = data.get("message") if isinstance(data, dict) else text.strip()[:200]
        raise ConnectError(f"{method} {path} answered {status}: {message}")
    return data
