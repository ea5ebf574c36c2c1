"""Watch events on the wire: each event encoded once, its bytes shared by every watcher sending it.

A batch message is a ``WorkloadEvent`` whose ``more`` holds the events after
the first.  Protobuf encodes a repeated message field as the concatenation of
its elements, each behind its tag and length, so a batch's bytes are the
first event's bytes followed by the others' tagged bytes: nothing is encoded
per watcher, only joined.
"""

from __future__ import annotations

from collections.abc import Sequence

from sluicegate.controller.service.codec import event_object
from sluicegate.controller.watch import WatchEvent
from sluicegate.v1 import workloads_pb2

_TYPE = {
    "ADDED": workloads_pb2.WorkloadEvent.ADDED,
    "MODIFIED": workloads_pb2.WorkloadEvent.MODIFIED,
    "DELETED": workloads_pb2.WorkloadEvent.DELETED,
}
# WorkloadEvent.more: field 3, length-delimited.
_MORE_TAG = bytes([3 << 3 | 2])


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _wire(ev: WatchEvent) -> tuple[bytes, bytes]:
    """(the event as a message, the same as an element of ``more``): made by the first watcher to send it."""
    w = ev.wire
    if w is None:
        body = workloads_pb2.WorkloadEvent(type=_TYPE[ev.type], workload=event_object(ev), time=ev.time)
        data = body.SerializeToString()
        w = ev.wire = (data, b"".join((_MORE_TAG, _varint(len(data)), data)))
    assert isinstance(w, tuple)
    return w


def batch_bytes(batch: Sequence[WatchEvent]) -> bytes:
    """The encoded ``WorkloadEvent`` carrying ``batch`` (the first event, the rest in ``more``)."""
    first = _wire(batch[0])[0]
    if len(batch) == 1:
        return first
    return b"".join([first, *(_wire(ev)[1] for ev in batch[1:])])


def batch_message(batch: Sequence[WatchEvent]) -> workloads_pb2.WorkloadEvent:
    """The message carrying ``batch``, built from the events' shared bytes.

    The servicer must hand the transport a message (its serializer is the
    generated one), so the joined bytes are parsed back: a copy in C, far
    cheaper than building each event's message again for every watcher.
    """
    return workloads_pb2.WorkloadEvent.FromString(batch_bytes(batch))
