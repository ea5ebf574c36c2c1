"""AtomicFile: every replace leaves exactly the new content, whatever the lengths before it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sluicegate.agent.checkpoint import AtomicFile


@pytest.mark.parametrize(
    "contents",
    [
        pytest.param([b"short", b"a much longer content", b"mid-length", b"x"], id="shrink-and-grow"),
        pytest.param([b"same", b"same", b"four", b"size"], id="same-length"),
        pytest.param([b"1", b"22", b"333", b"4444", b"55555"], id="always-growing"),
        pytest.param([b"", b"not empty", b""], id="empty"),
    ],
)
def test_each_replace_leaves_exactly_the_new_content(tmp_path: Path, contents: list[bytes]) -> None:
    target = tmp_path / "file.json"
    writer = AtomicFile(target)
    seen = []
    for data in contents:
        writer.replace(data)
        seen.append(target.read_bytes())
    assert seen == contents


def test_a_new_writer_truncates_slots_it_did_not_write(tmp_path: Path) -> None:
    # A restarted agent does not know how long the slots are: a shorter
    # write must not keep the end of what an earlier process wrote.
    target = tmp_path / "file.json"
    first = AtomicFile(target)
    for data in (b"a long first content", b"another long content"):
        first.replace(data)
    second = AtomicFile(target)
    seen = []
    for data in (b"short", b"tiny"):
        second.replace(data)
        seen.append(target.read_bytes())
    slots = sorted(os.path.getsize(path) for path in tmp_path.glob(".file.json.slot-*"))
    assert (seen, slots) == ([b"short", b"tiny"], [4, 5])
