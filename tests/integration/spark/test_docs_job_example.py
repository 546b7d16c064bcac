"""The guide's bulk-job example (docs/plugin-authoring.md, "Adding a bulk job") counts a real topic with Spark.

The example's module is cut out of the page (:mod:`support.doc_examples`) and imported from a
scratch directory. Its ``CountJob`` runs on the session's ``local[2]`` Spark (one SparkContext per
process: a job run by the launcher would build and then stop its own), reading a real topic on
cluster A; its ``CountCommand`` parses its arguments and hands them to the launcher's ``run_job``,
which here runs that same job on the same session, so its printed summary is checked too.
"""

from __future__ import annotations

import argparse
import importlib.util

import pytest

from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
from mirrorline.spark.runner import SparkJobContext
from support.doc_examples import examples
from support.kafka import produce

pytestmark = pytest.mark.integration


def load(tmp_path):
    """The example's module, imported from its own file."""
    path = tmp_path / "count_job.py"
    path.write_text(examples()["count-job"]["count_job.py"])
    spec = importlib.util.spec_from_file_location("docs_count_job", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class SessionLauncher:
    """``run_job`` on the test session's Spark: the job and its context are the real ones, the session shared."""

    def __init__(self, spark, jobs):
        self.spark = spark
        self.jobs = {job.name: job for job in jobs}

    async def run_job(self, name, settings, *, client_settings=None):
        job = self.jobs[name]()
        context = SparkJobContext(job, settings, client_settings or {}, KAFKA_CLIENTS)
        context._session = self.spark
        return await job.run(context)


async def test_the_documented_job_counts_a_topic(spark, cluster_a, make_topic, tmp_path, capsys):
    module = load(tmp_path)
    (job_class,) = module.register_jobs()
    (command,) = module.register_commands()
    topic = await make_topic(cluster_a, partitions=1)
    await produce(cluster_a.bootstrap_servers, topic, [(0, None, f"v{i}".encode(), [], None) for i in range(1000)])

    parser = argparse.ArgumentParser()
    command.configure_parser(parser)
    args = parser.parse_args([cluster_a.bootstrap_servers, topic])
    assert await command.run(args, SessionLauncher(spark, [job_class])) == 0
    assert capsys.readouterr().out.strip() == "{'records': 1000}"
