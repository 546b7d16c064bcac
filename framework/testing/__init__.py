"""Test kit for mirrorline and for plugin authors: real local Kafka fixtures and helpers.

Load the pytest fixtures with ``pytest_plugins = ["mirrorline.testing.fixtures"]``.
"""
