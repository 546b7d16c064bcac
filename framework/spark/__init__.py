"""The PySpark backend: SparkSession from settings, exact Kafka reads and timestamp-keeping writes,
and the runner of plugin jobs (:mod:`mirrorline.api.jobs`).

Loaded only when a job runs (``WorkerLauncher.run_job``); pyspark is the optional ``spark`` extra.
Nothing here imports pyspark at module level.
"""
