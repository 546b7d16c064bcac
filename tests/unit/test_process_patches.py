"""process_patches.install() from many threads at once installs each change exactly once.

Each change reads aiokafka's current function and replaces it. Before the lock, two threads
installing together (LocalKafka probes its clusters' brokers from one thread each) could wrap each
other's replacement: metadata answers then decoded into themselves and every metadata request of
the process failed, so a benchmark's brokers "did not answer within 90 s" although both had
started. The race needs a fresh process, so each try runs in a child interpreter that switches
threads as often as it can; without the lock four of six such children went wrong.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import sys, threading
    sys.setswitchinterval(1e-6)
    from aiokafka.cluster import ClusterMetadata
    from aiokafka.conn import AIOKafkaConnection
    from aiokafka.protocol import metadata as protocol
    from mirrorline.clients import frame_release, metadata_reuse, process_patches

    barrier = threading.Barrier(8)
    errors = []

    def install():
        barrier.wait()
        try:
            process_patches.install()
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=install) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wrapped = [f"MetadataResponse_v{v}.decode" for v, decode in metadata_reuse._ORIGINAL_DECODE.items()
               if "_lazy_decode" in getattr(decode, "__qualname__", "")]
    if metadata_reuse._ORIGINAL_UPDATE is metadata_reuse.update_metadata:
        wrapped.append("ClusterMetadata.update_metadata")
    if frame_release._ORIGINAL_READ is frame_release._read:
        wrapped.append("AIOKafkaConnection._read")
    assert ClusterMetadata.update_metadata is metadata_reuse.update_metadata
    assert AIOKafkaConnection._read is frame_release._read
    print("errors", errors, "wrapped twice", wrapped)
    sys.exit(1 if errors or wrapped else 0)
""")


def test_installing_from_many_threads_at_once_wraps_nothing_twice():
    children = [subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True) for _ in range(5)]
    outcomes = [(child.wait(timeout=120), child.stdout.read()) for child in children]
    for child in children:
        child.stdout.close()
    failed = [output for code, output in outcomes if code != 0]
    assert not failed, failed[0][-2000:]
