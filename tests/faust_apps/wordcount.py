"""A Faust word count that runs unchanged on its home cluster A or, after a failover, on B.

Counts each record of topic ``WORDCOUNT_TOPIC`` (value = one word, key = the same word, so a
word always lands in one partition and its table entry lives in that partition's changelog)
into the table ``counts``. Where it runs comes from the environment only:

* ``WORDCOUNT_BROKER`` (``host:port``), ``WORDCOUNT_APP_ID``, ``WORDCOUNT_TOPIC``,
  ``WORDCOUNT_PARTITIONS`` (the source topic's partition count; the changelog must match it),
  ``WORDCOUNT_DATADIR``;
* the failover helper's variables (``MIRRORLINE_FAILOVER_SOURCE`` ...): on B the app reads
  ``A.<topic>`` and recovers and writes ``A.<app id>-counts-changelog``.

Run it as a Faust worker: ``python tests/faust_apps/wordcount.py worker -l info``.
Memory store (the table is rebuilt from the changelog at every start), no web server.
"""

from __future__ import annotations

import os

import faust

from mirrorline.connectors.faust_failover import FaustTopicNames

names = FaustTopicNames.from_env()
PARTITIONS = int(os.environ.get("WORDCOUNT_PARTITIONS", "3"))

app = faust.App(
    os.environ.get("WORDCOUNT_APP_ID", "wordcount"),
    broker=f"kafka://{os.environ.get('WORDCOUNT_BROKER', '127.0.0.1:19092')}",
    store="memory://",
    datadir=os.environ.get("WORDCOUNT_DATADIR", "/tmp/wordcount-data"),
    web_enabled=False,
    topic_partitions=PARTITIONS,
    **names.faust_settings(),  # on B: tables whose changelog is the mirrored (renamed) one
)
words = app.topic(names.topic(os.environ.get("WORDCOUNT_TOPIC", "words")), value_serializer="raw",
                  key_serializer="raw", partitions=PARTITIONS)
counts = app.Table("counts", default=int, partitions=PARTITIONS)


@app.agent(words)
async def count(stream):
    """Add one to the word's count for every record (one at a time: concurrency 1)."""
    async for word in stream:
        counts[word.decode()] += 1


if __name__ == "__main__":
    app.main()
