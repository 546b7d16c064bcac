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
