"""The state topic emptied of an earlier twin's records when a twin starts on a new checkpoint.

The state topic (streaming/state_rows.py) says what the twin holds now; a twin on a new checkpoint
holds nothing yet, and writes a record only for what it touches. The records an earlier twin left
(a checkpoint deleted to start afresh, `make run`'s demo before `lab up --twin`) would stay on the
compacted topic for good: `where` would show a message as in transit that this twin never saw, and
`server` its queue. So each key still holding a record gets a tombstone, in its own partition (the
sink's partitioner is not librdkafka's), before the query writes anything.
"""

from __future__ import annotations

from infra.kafka import Kafka, producer, send
from streaming.broker_watch import QUIET_LOG_LEVEL
from streaming.views import read_to_end


def clear_earlier_twin(kafka: Kafka, topic: str, timeout_s: float = 300.0) -> int:
    """Tombstones for every record alive on `topic`; how many. Raises if they are not all acknowledged."""
    alive: dict[bytes, int] = {}
    for key, value, partition in read_to_end(kafka, topic, timeout_s):
        if value is None:
            alive.pop(key, None)
        else:
            alive[key] = partition
    if not alive:
        return 0
    failures: list[str] = []
    out = producer(kafka, log_level=QUIET_LOG_LEVEL)  # a failure is said once, by the error below
    for key, partition in alive.items():
        send(out, topic, key, None, partition=partition,
             on_delivery=lambda error, _: error is not None and failures.append(str(error)))
        out.poll(0)
    unsent = out.flush(timeout_s)
    if unsent or failures:
        raise TimeoutError(f"{topic}: {unsent + len(failures)} of {len(alive)} tombstones for an earlier twin's"
                           f" records not acknowledged{': ' + failures[0] if failures else ''}")
    return len(alive)
