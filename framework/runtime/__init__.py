"""The runtime: plugins, workers running connectors and tasks, and the herders that drive them."""
