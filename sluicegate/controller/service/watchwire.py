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
from itertools import islice

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
# The two-byte varints (128 to 16,383: most lengths of a workload's JSON and of an event) end to end, the
# one of n at 2 * (n - 128): a slice of one 32 KiB string instead of 16,256 small objects.
_TWO = b"".join(bytes((n & 0x7F | 0x80, n >> 7)) for n in range(0x80, 0x4000))
# The fast path's fixed parts: the kind and the namespace's key together, and the bytes of an Object
# (kind; the keys of namespace, name, json and resource_version; a one-byte length each for namespace
# and name, two for json) and of a WorkloadEvent (type, the workload's key, the time's key and
# its 8 bytes) that do not depend on the event.
_OBJECT_KIND_NAMESPACE = _OBJECT_KIND + _OBJECT_NAMESPACE
_FIXED_OBJECT = len(_OBJECT_KIND) + 4 + 1 + 1 + 2
_FIXED_EVENT = 2 + 1 + 1 + 8


def _varint(n: int) -> bytes:
    """Protobuf's varint of a non-negative int (an int64's negative is written as its 64-bit two's complement)."""
    if 0 <= n < 0x80:
        return _SMALL[n]
    if 0 < n < 0x4000:
        return _TWO[2 * n - 0x100:2 * n - 0xFE]
    if 0 < n < 0x20_0000:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14))
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
    n_ns, n_name, n_body = len(ns), len(name), len(body)
    if 0 < n_ns < 0x80 and 0 < n_name < 0x80 and 0x80 <= n_body and 0 < version < 0x20_0000 and time != _ZERO_DOUBLE:
        # A stored workload's event, every field written, in the common sizes (names under 128 bytes, the
        # event under 16 KiB, a version under 2**21): one join, each varint made in place (a call each
        # cost more than the rest of the event).
        if version < 0x80:
            vv = _SMALL[version]
        elif version < 0x4000:
            vv = _TWO[2 * version - 0x100:2 * version - 0xFE]
        else:
            vv = bytes((version & 0x7F | 0x80, version >> 7 & 0x7F | 0x80, version >> 14))
        obj_len = _FIXED_OBJECT + n_ns + n_name + n_body + len(vv)
        size = _FIXED_EVENT + 2 + obj_len  # obj_len's varint: two bytes, as it is at least n_body
        if size < 0x4000:
            w = ev.wire = b"".join((
                _MORE_TAG, _TWO[2 * size - 0x100:2 * size - 0xFE], _EVENT_TYPE[ev.type], _EVENT_WORKLOAD,
                _TWO[2 * obj_len - 0x100:2 * obj_len - 0xFE], _OBJECT_KIND_NAMESPACE, _SMALL[n_ns], ns, _OBJECT_NAME,
                _SMALL[n_name], name, _OBJECT_JSON, _TWO[2 * n_body - 0x100:2 * n_body - 0xFE], body,
                _OBJECT_VERSION, vv, _EVENT_TIME, time))
            return w
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
    # Every watcher but the first to send an event finds its bytes made: read them without a call.
    return b"".join([memoryview(first)[_prefix_len(first):],
                     *[w if type(w := ev.wire) is bytes else event_bytes(ev) for ev in islice(batch, 1, None)]])


def batch_message(batch: Sequence[WatchEvent]) -> workloads_pb2.WorkloadEvent:
    """The message carrying ``batch``, built from the events' shared bytes.

    For a transport whose serializer is the generated one (it must be handed
    a message): the joined bytes are parsed back, a copy in C, far cheaper
    than building each event's message again for every watcher.
    """
    return workloads_pb2.WorkloadEvent.FromString(batch_bytes(batch))
