"""The status page (``GET /ui``) in a real headless Chromium, over a worker mirroring A->B.

The worker runs in this test's event loop, so every blocking Selenium call goes through
``asyncio.to_thread``: a WebDriverWait on the loop itself would freeze the worker it waits for.
Chromium and its driver are Debian's (``scripts/bootstrap`` installs them); Selenium is pointed
at them explicitly so that it never tries to download a browser or a driver.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from aiokafka import TopicPartition

from support.kafka import commit_on, create_topic, produce
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
PARTITIONS = 2
WAIT_S = 60.0

# One atomic read of what the page shows (the page redraws every 2 s, so elements found in one
# call may be gone by the next: reading everything in one script avoids stale references).
SNAPSHOT_JS = """
const app = document.getElementById("app");
const text = (row, sel) => { const e = row.querySelector(sel); return e ? e.textContent.trim() : null; };
const out = {polls: Number(app.getAttribute("data-polls")), error: document.getElementById("poll-error").textContent,
             connectors: {}, tasks: {}, topics: {}, groups: {}, jobs: {}};
for (const row of app.querySelectorAll("tr[data-connector]")) {
  out.connectors[row.dataset.connector] = {state: row.dataset.state, worker: text(row, ".worker"),
                                           flow: row.closest("section.flow").dataset.flow};
}
for (const row of app.querySelectorAll("tr[data-task]")) {
  const pre = row.querySelector("details.trace pre");
  out.tasks[row.dataset.task] = {state: row.dataset.state, worker: text(row, ".worker"),
                                 trace: pre ? pre.textContent : null,
                                 traceOpen: !!row.querySelector("details.trace[open]"),
                                 traceVisible: !!pre && pre.checkVisibility()};
}
for (const row of app.querySelectorAll("tr[data-topic]")) {
  out.topics[row.dataset.topic] = {flow: row.dataset.flow, records: text(row, ".records"), rate: text(row, ".rate"),
                                   lag: text(row, ".lag"),
                                   ratePoints: Number(row.querySelector("svg.spark-rate").getAttribute("data-points")),
                                   lagPoints: Number(row.querySelector("svg.spark-lag").getAttribute("data-points"))};
}
for (const row of app.querySelectorAll("tr[data-job]")) {
  const bar = row.querySelector("progress");
  out.jobs[row.dataset.job] = {state: row.dataset.state, worker: text(row, ".worker"),
                               percent: bar ? Number(bar.getAttribute("data-percent")) : null,
                               progress: text(row, ".progress-cell")};
}
for (const row of app.querySelectorAll("tr[data-group]")) {
  out.groups[row.dataset.group] = {flow: row.dataset.flow, age: text(row, ".age"), rpo: text(row, ".rpo")};
}
return out;
"""


def number(text: str | None) -> float | None:
    """A figure as the page prints it ("1,250", "3.5", "12.0 s"); None for "–" or a missing cell."""
    if not text:
        return None
    try:
        return float(text.split()[0].replace(",", ""))
    except ValueError:
        return None


def require_browser() -> None:
    """Fail (not skip: CI installs them) when Debian's Chromium or its driver is missing."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if missing:
        pytest.fail(f"{' and '.join(missing)} missing: run scripts/bootstrap, which installs Debian's chromium "
                    "and chromium-driver (the status page is tested in a real browser)", pytrace=False)


@pytest.fixture
def start_browser(tmp_path, monkeypatch):
    """``start_browser()``: a headless Chromium (Debian's) through its own chromedriver; quit at teardown.

    Never downloads anything: both paths are given, so Selenium Manager is not used.
    """
    drivers = []

    def start():
        require_browser()
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        monkeypatch.setenv("SE_OFFLINE", "true")
        options = webdriver.ChromeOptions()
        for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                         "--disable-background-networking", "--disable-component-update", "--disable-sync",
                         "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'chromium-profile'}"):
            options.add_argument(argument)
        options.binary_location = CHROMIUM
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # page errors and CSP refusals
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        drivers.append(driver)
        driver.set_window_size(1400, 900)
        return driver

    yield start
    for driver in drivers:
        driver.quit()


async def wait_page(driver, condition, message: str, timeout: float = WAIT_S) -> Any:
    """Wait (in a thread) until ``condition(snapshot)`` is truthy; returns that value."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    last: dict[str, Any] = {}

    def check(d):
        last["snapshot"] = d.execute_script(SNAPSHOT_JS)
        return condition(last["snapshot"])

    wait = WebDriverWait(driver, timeout, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,))
    try:
        return await asyncio.to_thread(wait.until, check)
    except Exception as exc:  # TimeoutException: say what the page showed last
        raise AssertionError(f"status page never showed: {message}; last snapshot: {last.get('snapshot')}") from exc


async def open_trace(driver, task: str) -> None:
    """Click the task's collapsed trace open (retried: the row may be redrawn under the click)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def click_open(d):
        details = d.find_element(By.CSS_SELECTOR, f'tr[data-task="{task}"] details.trace')
        if details.get_attribute("open") is None:
            details.find_element(By.TAG_NAME, "summary").click()
        return d.find_element(By.CSS_SELECTOR, f'tr[data-task="{task}"] details.trace').get_attribute("open") \
            is not None

    wait = WebDriverWait(driver, 10, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,))
    await asyncio.to_thread(wait.until, click_open)


async def screenshot(driver, tmp_path: Path, name: str) -> Path:
    """The whole page as PNG, in tests/artifacts/ (kept for people) and in ``tmp_path``."""
    def take() -> bytes:
        # Chrome's DevTools capture beyond the viewport: the whole page, whatever the window size
        size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}})
        return base64.b64decode(shot["data"])

    png = await asyncio.to_thread(take)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    kept = ARTIFACTS / name
    kept.write_bytes(png)
    shutil.copyfile(kept, tmp_path / name)
    return kept



def records(count: int, start: int = 0) -> list[tuple]:
    """``count`` small records spread over the topic's partitions."""
    return [(i % PARTITIONS, f"k{i}".encode(), f"order {i}".encode(), [], None) for i in range(start, start + count)]


async def test_status_page_shows_flow_live_and_failures(cluster_a, cluster_b, flow_config, make_topic,
                                                        unique_name, tmp_path, start_browser):
    browser = start_browser()  # before the worker starts: this blocks the event loop for a second
    prefix = unique_name("ui")
    topic, remote, group = f"{prefix}-orders", f"A.{prefix}-orders", f"{prefix}-app"
    await create_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
    await produce(cluster_a.bootstrap_servers, topic, records(40))
    source, checkpoint, failing = f"{prefix}-source", f"{prefix}-checkpoint", f"{prefix}-seq"
    connectors = [
        {"name": source, **flow_config(topics=topic, tasks_max=2)},
        {"name": checkpoint, **flow_config(connector_class="MirrorCheckpointConnector", topics=topic,
                                           groups=f"{prefix}.*", tasks_max=1, **{
                                               "emit.checkpoints.interval.seconds": 1,
                                               "refresh.groups.interval.seconds": 1,
                                               "checkpoints.topic.replication.factor": 1})},
    ]
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers, "restart.on.failure.enable": "false",
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}

    async with running_standalone(worker, connectors) as url, Rest(url) as rest:
        status = await rest.wait_for(f"/connectors/{source}/status", all_running(2))
        worker_id = status["connector"]["worker_id"]
        await asyncio.to_thread(browser.get, url + "/ui")
        assert await asyncio.to_thread(lambda: browser.title) == "mirrorline status"

        # the flow, its connectors and both tasks, RUNNING on this worker
        page = await wait_page(browser, lambda p: p if (
            p["connectors"].get(source, {}).get("state") == "RUNNING"
            and all(p["tasks"].get(f"{source}/{i}", {}).get("state") == "RUNNING" for i in range(2))) else None,
            "the mirror connector and its 2 tasks RUNNING")
        assert page["connectors"][source] == {"state": "RUNNING", "worker": worker_id, "flow": "A->B"}
        assert page["connectors"][checkpoint]["flow"] == "A->B"
        for i in range(2):
            assert page["tasks"][f"{source}/{i}"]["worker"] == worker_id
            assert page["tasks"][f"{source}/{i}"]["trace"] is None
        assert not page["error"]

        # the remote topic's figures appear once the first records are mirrored
        page = await wait_page(browser, lambda p: p if number(p["topics"].get(remote, {}).get("records")) == 40
                               else None, f"{remote} with 40 records")
        assert page["topics"][remote]["flow"] == "A->B"
        points_before = page["topics"][remote]["ratePoints"]

        # more records on A: the count climbs, the rate is seen above zero, the sparklines grow
        async def trickle() -> None:
            for batch in range(6):
                await produce(cluster_a.bootstrap_servers, topic, records(40, start=40 + 40 * batch))
                await asyncio.sleep(0.7)

        producing = asyncio.create_task(trickle())
        seen_rates: list[float] = []

        def caught_up(p):
            row = p["topics"].get(remote, {})
            seen_rates.append(number(row.get("rate")) or 0.0)
            return p if number(row.get("records")) == 280 and max(seen_rates) > 0 else None

        page = await wait_page(browser, caught_up, f"{remote} with 280 records and a positive records/s")
        await producing
        row = page["topics"][remote]
        assert row["ratePoints"] > points_before and row["lagPoints"] == row["ratePoints"] + 1
        assert number(row["lag"]) is not None

        # a consumer group committed on A: its checkpoint age and RPO (records re-read on failover)
        await commit_on(cluster_a.bootstrap_servers, group,
                        {TopicPartition(topic, p): 100 for p in range(PARTITIONS)})
        page = await wait_page(browser, lambda p: p if (
            number(p["groups"].get(group, {}).get("age")) is not None
            and number(p["groups"].get(group, {}).get("rpo")) is not None) else None,
            f"group {group} with a checkpoint age and an RPO")
        assert page["groups"][group]["flow"] == "A->B"
        assert number(page["groups"][group]["rpo"]) >= 0

        # a job: listed with a progress bar while it runs, then SUCCEEDED. It runs about 16 s: progress
        # reaches the status store every 2 s and the page polls every 2 s plus its own round trip, and
        # a 6-s job (150 ms steps) once went from 2 % to SUCCEEDED between two polls under CI load
        job = f"{prefix}-job"
        code, _ = await rest.call("POST", "/jobs", {"name": job, "config": {
            "job.class": "example-steps", "steps.count": "40", "steps.step.ms": "400"}})
        assert code == 201
        page = await wait_page(browser, lambda p: p if p["jobs"].get(job, {}).get("state") == "RUNNING"
                               and 0 < (p["jobs"][job]["percent"] or 0) < 100 else None, f"job {job} RUNNING, part done")
        assert page["jobs"][job]["worker"] == worker_id and "steps" in page["jobs"][job]["progress"]
        page = await wait_page(browser, lambda p: p if p["jobs"].get(job, {}).get("state") == "SUCCEEDED"
                               else None, f"job {job} SUCCEEDED")
        assert page["jobs"][job]["percent"] == 100

        # a task that fails (no automatic restart on this worker): FAILED with its trace, collapsed
        seq_topic = await make_topic(cluster_b, partitions=1)
        code, _ = await rest.call("PUT", f"/connectors/{failing}/config", {
            "connector.class": "SequenceSource", "tasks.max": "1", "topic": seq_topic, "streams": "1",
            "records.per.poll": "10", "poll.interval.ms": "20", "fail.on.seq": "30"})
        assert code == 201
        page = await wait_page(browser, lambda p: p if p["tasks"].get(f"{failing}/0", {}).get("state") == "FAILED"
                               else None, f"task {failing}/0 FAILED")
        task = page["tasks"][f"{failing}/0"]
        assert task["worker"] == worker_id
        assert "fail.on.seq" in task["trace"] and not task["traceVisible"]
        assert page["connectors"][failing]["flow"] == ""  # not a mirror connector: "Other connectors"
        await open_trace(browser, f"{failing}/0")
        page = await wait_page(browser, lambda p: p if p["tasks"][f"{failing}/0"]["traceVisible"] else None,
                               "the trace expanded")
        # the open trace survives the next redraws
        polls = page["polls"]
        page = await wait_page(browser, lambda p: p if p["polls"] >= polls + 2 else None, "two more redraws")
        assert page["tasks"][f"{failing}/0"]["traceOpen"]

        shot = await screenshot(browser, tmp_path, "status_page.png")
        assert shot.stat().st_size > 10_000
        console = await asyncio.to_thread(browser.get_log, "browser")
        assert [entry for entry in console if entry["level"] == "SEVERE"] == []
