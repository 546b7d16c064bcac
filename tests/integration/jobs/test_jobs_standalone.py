"""Bulk jobs on a standalone worker over REST: accepted, run in their own process, progress, cancel, remove.

Uses the example plugin's ``example-steps`` job (no Spark: each step stores its count in the
worker's offset file), so the runtime's handling of jobs is checked in seconds; the Spark jobs
run in ``tests/integration/spark/test_jobs_*.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from support.worker import Rest, running_standalone

pytestmark = pytest.mark.integration


def steps_job(name: str, **settings) -> dict:
    """A ``POST /jobs`` body for the example-steps job."""
    return {"name": name, "config": {"job.class": "example-steps",
                                     **{k.replace("_", "."): str(v) for k, v in settings.items()}}}


def job_processes() -> list[int]:
    """Pids of the job processes this test's (in-process) worker started."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read()
            with open(f"/proc/{entry}/stat") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"mirrorline.boot.job_process" in command and parent == os.getpid():
            found.append(int(entry))
    return found


async def cli(*args: str):
    """``mirrorline jobs ARGS`` in a process of its own."""
    import subprocess
    import sys

    return await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "mirrorline.cli.main", "jobs", *args],
                                   capture_output=True, text=True, timeout=60)


def finished(info: dict) -> bool:
    return info["state"] in ("SUCCEEDED", "FAILED", "CANCELLED")


async def test_job_runs_reports_progress_and_is_removed_with_its_result(cluster_a, tmp_path):
    offsets_file = tmp_path / "offsets.json"
    async with running_standalone({"bootstrap.servers": cluster_a.bootstrap_servers,
                                   "offset.storage.file.filename": str(offsets_file)}) as url:
        async with Rest(url) as rest:
            status, plugins = await rest.call("GET", "/job-plugins")
            assert status == 200
            assert {"backfill", "mm2-reconcile", "example-steps"} <= {p["name"] for p in plugins}
            assert all(p["type"] == "job" for p in plugins)

            status, info = await rest.call("POST", "/jobs", steps_job("count", steps_count=30, steps_step_ms=100))
            assert status == 201, info
            assert info["state"] in ("PENDING", "RUNNING") and info["job.class"] == "example-steps"
            running = await rest.wait_for("/jobs/count", lambda i: i["state"] == "RUNNING" and i["progress"]
                                          and 0 < i["progress"]["completed"] < 30, timeout=60)
            assert running["progress"]["total"] == 30 and running["progress"]["unit"] == "steps"
            assert running["worker_id"] and running["attempt"] == 1
            status, listed = await rest.call("GET", "/jobs?expand=status")
            assert listed["count"]["status"]["state"] in ("RUNNING", "SUCCEEDED")
            assert (await rest.call("GET", "/jobs"))[1] == ["count"]

            done = await rest.wait_for("/jobs/count", finished, timeout=60)
            assert done["state"] == "SUCCEEDED", done
            assert done["result"] == {"steps": 30, "resumed_from": 0}
            assert done["progress"]["completed"] == 30 and done["progress"]["percent"] == 100.0
            # the job wrote its progress into the worker's own offset store (the file), through the worker
            stored = json.loads(offsets_file.read_text())["offsets"]
            assert {"connector": "example-steps", "partition": {"job": "count"}, "offset": {"steps": 30}} in stored

            # mirrorline jobs list|status|cancel wrap the same calls (run as a user would, in a process)
            listed = await cli("list", "--url", url)
            assert listed.returncode == 0 and "count" in listed.stdout and "SUCCEEDED" in listed.stdout
            assert "100.0%" in listed.stdout, listed.stdout
            status_out = await cli("status", "count", "--url", url)
            assert status_out.returncode == 0 and json.loads(status_out.stdout)["result"]["steps"] == 30
            missing = await cli("status", "nope", "--url", url)
            assert missing.returncode == 1 and missing.stderr.strip() == \
                "mirrorline: error: GET /jobs/nope answered 404: Job nope not found"
            cancel = await cli("cancel", "count", "--url", url)
            assert cancel.returncode == 0 and json.loads(cancel.stdout)["result"]["steps"] == 30
            assert (await rest.call("GET", "/jobs/count"))[0] == 404
            assert (await rest.call("DELETE", "/jobs/count"))[0] == 404


async def test_cancel_failure_and_bad_input(cluster_a, tmp_path):
    async with running_standalone({"bootstrap.servers": cluster_a.bootstrap_servers,
                                   "offset.storage.file.filename": str(tmp_path / "offsets.json")}) as url:
        async with Rest(url) as rest:
            # bad input: 4xx with a message naming the field
            status, body = await rest.call("POST", "/jobs", {"name": "x", "config": {"job.class": "nope"}})
            assert status == 400 and body["message"].startswith("job.class: unknown job class 'nope'")
            status, body = await rest.call("POST", "/jobs", {"name": "x", "config": {}})
            assert status == 400 and body["message"].startswith("job.class: required")
            status, body = await rest.call("POST", "/jobs", steps_job("x", steps_count=0))
            assert status == 400 and "steps.count" in body["message"]
            status, body = await rest.call("POST", "/jobs", {"name": "x", "config": {
                "job.class": "backfill", "connector": "no-such-connector"}})
            assert status == 400 and body["message"].startswith("connector: there is no connector named")
            status, body = await rest.call("POST", "/jobs", {"name": "", "config": {"job.class": "example-steps"}})
            assert status == 400 and body["message"].startswith("name:")
            assert (await rest.call("GET", "/jobs"))[1] == []

            # a running job is cancelled: it hands over what it did and is CANCELLED with that result
            assert (await rest.call("POST", "/jobs", steps_job("long", steps_count=1000, steps_step_ms=50)))[0] == 201
            assert (await rest.call("POST", "/jobs", steps_job("long", steps_count=5)))[0] == 409
            await rest.wait_for("/jobs/long", lambda i: (i["progress"] or {}).get("completed", 0) >= 3, timeout=60)
            status, body = await rest.call("DELETE", "/jobs/long")
            assert status == 202 and body["cancel_requested"] is True
            cancelled = await rest.wait_for("/jobs/long", finished, timeout=60)
            assert cancelled["state"] == "CANCELLED", cancelled
            assert cancelled["result"]["cancelled"] is True and 3 <= cancelled["result"]["steps"] < 1000
            status, body = await rest.call("DELETE", "/jobs/long")
            assert status == 200 and body["state"] == "CANCELLED" and body["result"]["steps"] >= 3

            # the job's process (its driver) SIGKILLed while its worker lives: it runs again and resumes
            assert (await rest.call("POST", "/jobs", steps_job("again", steps_count=40, steps_step_ms=100)))[0] == 201
            await rest.wait_for("/jobs/again", lambda i: (i["progress"] or {}).get("completed", 0) >= 10, timeout=60)
            (pid,) = job_processes()
            os.kill(pid, signal.SIGKILL)
            again = await rest.wait_for("/jobs/again", finished, timeout=90)
            assert again["state"] == "SUCCEEDED" and again["attempt"] == 2, again
            assert again["result"]["steps"] == 40 and again["result"]["resumed_from"] >= 10

            # a failing job is FAILED with its reason
            assert (await rest.call("POST", "/jobs", steps_job("bad", steps_count=10, steps_fail_at=2,
                                                               steps_step_ms=10)))[0] == 201
            failed = await rest.wait_for("/jobs/bad", finished, timeout=60)
            assert failed["state"] == "FAILED" and "step 2: failing as steps.fail.at says" in failed["trace"]


async def test_unreachable_spark_master_fails_the_job_quickly_with_the_reason(cluster_a, cluster_b, make_topic,
                                                                              tmp_path):
    topic = await make_topic(cluster_a, partitions=1)
    mirror = {"connector.class": "MirrorSourceConnector", "source.cluster.alias": "A", "target.cluster.alias": "B",
              "source.cluster.bootstrap.servers": cluster_a.bootstrap_servers,
              "target.cluster.bootstrap.servers": cluster_b.bootstrap_servers, "topics": topic,
              "replication.factor": "1", "offset-syncs.topic.replication.factor": "1"}
    async with running_standalone({"bootstrap.servers": cluster_b.bootstrap_servers,
                                   "offset.storage.file.filename": str(tmp_path / "offsets.json")}) as url:
        async with Rest(url) as rest:
            status, body = await rest.call("POST", "/connectors", {"name": "m", "config": mirror,
                                                                  "initial_state": "STOPPED"})
            assert status == 201, body
            started = asyncio.get_running_loop().time()
            status, body = await rest.call("POST", "/jobs", {"name": "bf", "config": {
                "job.class": "backfill", "connector": "m", "spark.master": "spark://127.0.0.1:1"}})
            assert status == 201, body
            failed = await rest.wait_for("/jobs/bf", finished, timeout=90)
            assert failed["state"] == "FAILED"
            assert "Spark master spark://127.0.0.1:1 is unreachable" in failed["trace"], failed["trace"]
            assert asyncio.get_running_loop().time() - started < 60
            # a failed backfill keeps its partitions (nothing of the copy is lost track of) until it is removed
            assert (await rest.call("GET", "/connectors/m/status"))[1]["jobs"][0]["name"] == "bf"
            status, removed = await rest.call("DELETE", "/jobs/bf")
            assert status == 200 and removed["state"] == "FAILED"
            assert "jobs" not in (await rest.call("GET", "/connectors/m/status"))[1]
