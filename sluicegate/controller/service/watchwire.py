"""Watch events on the wire: each event encoded once, its bytes shared by every watcher sending it.

A batch message is a ``WorkloadEvent`` whose ``more`` holds the events after
the first.  Protobuf encodes a repeated message field as the concatenation of
its elements, each behind its tag and length, so a batch's bytes are the
first event's bytes followed by the others' tagged bytes: nothing is encoded
per watcher, only joined.

An event's bytes are written here directly (the few fields of a
``WorkloadEvent`` and its ``Object``, around the JSON the event's write
stored), byte for byte what protobuf's ``SerializeToString`` writes for the
same message: building two messages per event only to serialize them cost
more than the rest of sending it.  Each event keeps one ``bytes``: the event
as an element of ``more`` (tag, length, event); the first event of a batch
is the same bytes past that prefix.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from sluicegate.controller.watch import WatchEvent
from sluicegate.v1 import workloads_pb2

_TYPE = {
    "ADDED": workloads_pb2.WorkloadEvent.ADDED,
    "MODIFIED": workloads_pb2.WorkloadEvent.MODIFIED,
    "DELETED": workloads_pb2.WorkloadEvent.DELETED,
}
# Field keys (field number << 3 | wire type; 0: varint, 1: 64-bit, 2: length-delimited).
# WorkloadEvent: type = 1 (enum), workload = 2 (Object), more = 3 (repeated WorkloadEvent), time = 4 (double).
_EVENT_TYPE = {name: bytes([1 << 3 | 0, value]) for name, value in _TYPE.items()}
_EVENT_WORKLOAD = bytes([2 << 3 | 2])
_MORE_TAG = bytes([3 << 3 | 2])
_EVENT_TIME = bytes([4 << 3 | 1])
# Object: kind = 1, namespace = 2, name = 3 (strings), json = 4 (bytes), resource_version = 5 (int64).
_OBJECT_KIND = bytes([1 << 3 | 2, len(b"Workload")]) + b"Workload"
_OBJECT_NAMESPACE = bytes([2 << 3 | 2])
_OBJECT_NAME = bytes([3 << 3 | 2])
_OBJECT_JSON = bytes([4 << 3 | 2])
_OBJECT_VERSION = bytes([5 << 3 | 0])
_DOUBLE = struct.Struct("<d")
_ZERO_DOUBLE = bytes(8)

# Varints of the small numbers most lengths are, made once.
_SMALL = [bytes([n]) for n in range(0x80)]


def _varint(n: int) -> bytes:
    """Protobuf's varint of a non-negative int (an int64's negative is written as its 64-bit two's complement)."""
    if 0 <= n < 0x80:
        return _SMALL[n]
    if 0 < n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    n &= 0xFFFF_FFFF_FFFF_FFFF
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _prefix_len(more: bytes) -> int:
    """Length of the tag and length varint in front of an element of ``more``."""
    i = 1
    while more[i] & 0x80:
        i += 1
    return i + 1


def event_bytes(ev: WatchEvent) -> bytes:
    """The event as an element of ``more`` (tag, length, the event): made by the first watcher to send it."""
    w = ev.wire
    if w is not None:
        assert isinstance(w, bytes)
        return w
    wl = ev.workload
    ns = wl.namespace.encode()
    name = wl.name.encode()
    version = ev.resource_version
    body = ev.encoded.with_resource_version(version)
    time = _DOUBLE.pack(ev.time)
    if ns and name and body and version > 0 and time != _ZERO_DOUBLE:
        # Every field written (a stored workload's event): one join, its lengths added up here.
        vn, vm, vb, vv = _varint(len(ns)), _varint(len(name)), _varint(len(body)), _varint(version)
        obj_len = (len(_OBJECT_KIND) + 4 + len(vn) + len(ns) + len(vm) + len(name) + len(vb) + len(body)
                   + len(vv))
        vo = _varint(obj_len)
        size = 3 + len(vo) + obj_len + 1 + len(time)
        w = ev.wire = b"".join((_MORE_TAG, _varint(size), _EVENT_TYPE[ev.type], _EVENT_WORKLOAD, vo, _OBJECT_KIND,
                                _OBJECT_NAMESPACE, vn, ns, _OBJECT_NAME, vm, name, _OBJECT_JSON, vb, body,
                                _OBJECT_VERSION, vv, _EVENT_TIME, time))
        return w
    obj: list[bytes] = [_OBJECT_KIND]
    # proto3: fields at their default (empty, zero) are not written.
    if ns:
        obj += (_OBJECT_NAMESPACE, _varint(len(ns)), ns)
    if name:
        obj += (_OBJECT_NAME, _varint(len(name)), name)
    if body:
        obj += (_OBJECT_JSON, _varint(len(body)), body)
    if version:
        obj += (_OBJECT_VERSION, _varint(version))
    obj_len = sum(map(len, obj))
    head = _EVENT_TYPE[ev.type] + _EVENT_WORKLOAD + _varint(obj_len)
    # A double is written unless all its bits are zero (-0.0 is written).
    tail = b"" if time == _ZERO_DOUBLE else _EVENT_TIME + time
    size = len(head) + obj_len + len(tail)
    w = ev.wire = b"".join((_MORE_TAG, _varint(size), head, *obj, tail))
    return w


def batch_bytes(batch: Sequence[WatchEvent]) -> bytes:
    """The encoded ``WorkloadEvent`` carrying ``batch`` (the first event, the rest in ``more``)."""
    first = event_bytes(batch[0])
    if len(batch) == 1:
        return first[_prefix_len(first):]
    return b"".join([memoryview(first)[_prefix_len(first):], *(event_bytes(ev) for ev in batch[1:])])


def batch_message(batch: Sequence[WatchEvent]) -> workloads_pb2.WorkloadEvent:
    """The message carrying ``batch``, built from the events' shared bytes.

    For a transport whose serializer is the generated one (it must be handed
    a message): the joined bytes are parsed back, a copy in C, far cheaper
    than building each event's message again for every watcher.
    """
    return workloads_pb2.WorkloadEvent.FromString(batch_bytes(batch))
