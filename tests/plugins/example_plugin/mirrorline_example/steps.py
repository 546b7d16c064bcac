"""``StepsJob`` (job class ``example-steps``): a bulk job without Spark that counts steps, resumably.

It exists to test how a worker cluster runs jobs (assignment, progress, cancellation, a worker
killed mid-job, resumption) in seconds. Each step sleeps ``steps.step.ms`` and then stores the
number of steps done in the worker cluster's offset store (connector ``example-steps``,
partition ``{"job": <job name>}``), so a rerun on another worker resumes after the last stored
step and never does a step twice. ``steps.fail.at`` makes it fail at a step. Cancelled, it
returns a summary (``"handed_over": true``) as a job that hands over what it finished would.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mirrorline.api import ConfigDef, ConfigError, ConfigKey, ConnectError, Importance, Job, JobContext, Range, Type

#: The "connector" under which the steps done are stored.
PROGRESS_CONNECTOR = "example-steps"


class StepsJob(Job):
    """Counts ``steps.count`` steps of ``steps.step.ms`` each, storing its progress after each step."""

    name = "example-steps"
    description = "count steps, resumably (a job without Spark, for tests)"
    config_def = ConfigDef([
        ConfigKey("steps.count", Type.INT, default=10, validator=Range(min=1), importance=Importance.HIGH,
                  doc="How many steps to count."),
        ConfigKey("steps.step.ms", Type.INT, default=100, validator=Range(min=0), importance=Importance.MEDIUM,
                  doc="How long each step takes."),
        ConfigKey("steps.fail.at", Type.INT, default=-1, importance=Importance.LOW,
                  doc="Fail when this step is reached (-1: never)."),
    ])

    async def run(self, context: JobContext) -> dict[str, Any]:
        if context.job_name is None:
            raise ConfigError("example-steps runs in a worker cluster only (POST /jobs)")
        count, step_ms = context.config["steps.count"], context.config["steps.step.ms"]
        key = {"job": context.job_name}
        async with context.source_offsets({}) as offsets:
            stored = (await offsets.get(PROGRESS_CONNECTOR, [key]))[0]
            done = int(stored["steps"]) if stored else 0
            first = done
            progress = context.progress(count, "steps", f"example-steps {context.job_name}")
            try:
                while done < count:
                    if done == context.config["steps.fail.at"]:
                        raise ConnectError(f"step {done}: failing as steps.fail.at says")
                    await asyncio.sleep(step_ms / 1000)
                    done += 1
                    await offsets.put(PROGRESS_CONNECTOR, [(key, {"steps": done})])
                    progress.update(done)
            except asyncio.CancelledError:
                return {"steps": done, "resumed_from": first, "handed_over": True, "cancelled": True}
            finally:
                progress.close()
        return {"steps": done, "resumed_from": first}
