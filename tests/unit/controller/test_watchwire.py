"""Watch events written by hand on the wire: the very bytes protobuf writes for the same messages."""

from __future__ import annotations

import pytest

from sluicegate.controller.service.watchwire import batch_bytes, batch_message, event_bytes
from sluicegate.controller.watch import WatchEvent
from sluicegate.manifest.encode import EncodedObject, encode_json
from sluicegate.v1 import objects_pb2, workloads_pb2
from tests.builders import workload

_TYPES = {"ADDED": workloads_pb2.WorkloadEvent.ADDED, "MODIFIED": workloads_pb2.WorkloadEvent.MODIFIED,
          "DELETED": workloads_pb2.WorkloadEvent.DELETED}


def _message(ev: WatchEvent) -> workloads_pb2.WorkloadEvent:
    """The event as protobuf builds it (what the controller sent before it wrote the bytes itself)."""
    wl = ev.workload
    obj = objects_pb2.Object(kind="Workload", namespace=wl.namespace, name=wl.name,
                             json=ev.encoded.with_resource_version(ev.resource_version),
                             resource_version=ev.resource_version)
    return workloads_pb2.WorkloadEvent(type=_TYPES[ev.type], workload=obj, time=ev.time)


def _events() -> list[WatchEvent]:
    small = workload("w-1")
    # A name whose length and a JSON whose length need two-byte varints; a version that needs several.
    big = workload("w-" + "x" * 200, ns="team-é", uid="u" * 300)
    return [
        WatchEvent("ADDED", small, 1, encode_json(small), 1_764_000_000.25),
        WatchEvent("MODIFIED", big, 2**40 + 5, encode_json(big), 0.0),  # time 0: not written
        WatchEvent("DELETED", small, 0, encode_json(small), -0.0),  # version 0 not written; -0.0 is
        WatchEvent("MODIFIED", small, 300, EncodedObject(b"", -1), 1.0),  # no JSON at all
    ]


@pytest.mark.parametrize("i", range(4))
def test_an_event_is_written_byte_for_byte_as_protobuf_writes_it(i: int) -> None:
    ev = _events()[i]
    expected = _message(ev).SerializeToString()
    more = event_bytes(ev)
    # As an element of ``more``: its tag (field 3, length-delimited), its length, then the event.
    assert more.endswith(expected) and more[0] == 3 << 3 | 2
    assert batch_bytes([ev]) == expected
    assert event_bytes(ev) is more  # made once, then shared by every watcher


def test_a_batch_is_the_first_event_with_the_others_in_more() -> None:
    events = _events()
    expected = _message(events[0])
    expected.more.extend(_message(ev) for ev in events[1:])
    # (Not the same bytes: protobuf writes the first event's time after ``more``, field order; a reader
    # takes fields in any order.)
    assert workloads_pb2.WorkloadEvent.FromString(batch_bytes(events)) == expected
    assert batch_message(events) == expected
    # Any event may come first in another watcher's batch.
    again = [events[2], events[0]]
    first = _message(events[2])
    first.more.append(_message(events[0]))
    assert workloads_pb2.WorkloadEvent.FromString(batch_bytes(again)) == first


def test_an_unknown_event_type_is_refused() -> None:
    wl = workload("w-1")
    with pytest.raises(KeyError):
        event_bytes(WatchEvent("BOOKMARK", wl, 1, encode_json(wl), 1.0))


@pytest.mark.parametrize("version", [1, 127, 128, 16_383, 16_384, 2**35, 2**63 - 1])
def test_lengths_and_versions_of_every_size(version: int) -> None:
    for name in ("w", "w" * 127, "w" * 128, "w" * 253):
        wl = workload(name, uid="u" * (version % 20_000))
        ev = WatchEvent("ADDED", wl, version, encode_json(wl), 2.5)
        assert batch_bytes([ev]) == _message(ev).SerializeToString()


@pytest.mark.parametrize("version", [1, 127, 128, 16_383, 16_384, 0x1F_FFFF, 0x20_0000])
@pytest.mark.parametrize("uid_len", [0, 200, 16_000, 16_300, 16_400])
def test_the_fast_path_at_the_edges_of_its_sizes(version: int, uid_len: int) -> None:
    """The common event (names under 128 bytes, a version under 2**21, the event under 16 KiB) writes its
    varints in place: around each limit, the same bytes as protobuf writes."""
    for ns, name in (("n", "w"), ("n" * 127, "w" * 127), ("n" * 128, "w")):
        wl = workload(name, ns=ns, uid="u" * uid_len)
        ev = WatchEvent("MODIFIED", wl, version, encode_json(wl), 1_764_000_000.5)
        assert batch_bytes([ev]) == _message(ev).SerializeToString()
        assert event_bytes(ev).endswith(_message(ev).SerializeToString())


@pytest.mark.parametrize("n", [1, 127, 128, 129, 300, 16_383, 16_384, 0x1F_FFFF, 0x20_0000, 2**40, 2**64 - 1])
def test_varints_as_protobuf_writes_them(n: int) -> None:
    from sluicegate.controller.service.watchwire import _varint

    # Field 5's key, then the varint (protobuf writes no zero: that one is checked by itself).
    assert _varint(n) == objects_pb2.Object(resource_version=n if n < 2**63 else n - 2**64).SerializeToString()[1:]
    assert _varint(0) == b"\x00"
