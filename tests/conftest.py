"""Test-wide configuration: real Kafka fixtures come from the framework's own test kit."""

pytest_plugins = ["framework.testing.fixtures"]
