"""Bulk jobs in the worker cluster, beside connectors (``POST /jobs``).

- :mod:`.spec`: a submitted job config checked and turned into the job's settings
  (``job.class``, the connector it names, its settings, the partitions it will write);
- :mod:`.holds`: which connector partitions jobs hold, and whether a connector has let go of them;
- :mod:`.process`: one job run in a process of its own (a Spark driver), and the line protocol
  between that process and its worker;
- :mod:`.manager`: the :class:`~.manager.JobManager` a herder keeps: it records jobs in the
  config and status stores, runs the jobs assigned to this worker, writes their progress, and
  cancels them.

The process itself is :mod:`mirrorline.boot.job_process` (process wiring: it builds Spark).
"""
