"""Test-wide configuration: real Kafka fixtures come from the framework's own test kit.

Every test that starts Kafka carries ``@pytest.mark.integration``, so that
``pytest -m "not integration"`` runs only the pure unit tests, in seconds. The hooks below
keep it that way: an unmarked test that asks for a Kafka fixture, or starts a cluster with
:class:`~mirrorline.localkafka.manager.LocalKafka` itself, fails with a message saying so.
"""

import pytest

# also installs mirrorline's metadata patch at pytest_configure, so the suite's raw clients never auto-create
pytest_plugins = ["mirrorline.testing.fixtures"]

#: Fixtures that start the session's real Kafka clusters (directly or through another fixture).
KAFKA_FIXTURES = {"local_kafka", "kafka_clusters"}

_UNMARKED = ("{test} starts Kafka ({how}) but is not marked integration: add "
             "`pytestmark = pytest.mark.integration` to its module (or @pytest.mark.integration to it), "
             "so that `pytest -m \"not integration\"` stays a quick, Kafka-free run.")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Fail an unmarked test that requests a Kafka fixture, before the fixture starts any cluster."""
    if item.get_closest_marker("integration") is None:
        used = sorted(KAFKA_FIXTURES.intersection(item.fixturenames))
        if used:
            pytest.fail(_UNMARKED.format(test=item.nodeid, how="fixture " + ", ".join(used)), pytrace=False)


@pytest.fixture(autouse=True)
def _no_kafka_in_unit_tests(request, monkeypatch):
    """An unmarked test that starts clusters with LocalKafka itself fails the same way."""
    if request.node.get_closest_marker("integration") is None:
        from mirrorline.localkafka.manager import LocalKafka

        def refuse(*_args, **_kwargs):
            pytest.fail(_UNMARKED.format(test=request.node.nodeid, how="LocalKafka.start"), pytrace=False)

        monkeypatch.setattr(LocalKafka, "start", refuse)


@pytest.fixture(scope="session")
def spark():
    """One ``local[2]`` SparkSession for the whole test process, unit and integration tests alike.

    Built by mirrorline's own ``spark_session``, so its JVM starts with the Kafka connector's jars:
    a process's first SparkContext decides the JVM's class path, and a session built without them
    (then stopped) would leave every later one unable to find the ``kafka`` data source. Under
    pytest-xdist any test file may be a process's first to need Spark.
    """
    pytest.importorskip("pyspark")
    from mirrorline.spark.session import spark_session

    session = spark_session({"spark.master": "local[2]", "spark.app.name": "mirrorline-tests",
                             "spark.ui.enabled": "false", "spark.driver.memory": "1g",
                             "spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC"})
    yield session
    session.stop()


# -- summary tables (tests/support/summary.py) ----------------------------------------------

#: section title -> (header, rows), from every test report this process sees
_SUMMARY: dict[str, tuple[str, list[str]]] = {}


def pytest_runtest_logreport(report):
    """Keep the summary rows a test put in its report (also reports from xdist workers)."""
    from support.summary import SUMMARY_ROW

    if report.when != "call":
        return
    for key, value in report.user_properties:
        if key == SUMMARY_ROW:
            section, header, row = value
            _SUMMARY.setdefault(section, (header, []))[1].append(row)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print each summary section with the rows measured in this run."""
    from support.summary import sort_key

    for section, (header, rows) in _SUMMARY.items():
        terminalreporter.section(section)
        terminalreporter.write_line(header)
        for row in sorted(rows, key=sort_key):
            terminalreporter.write_line(row)
