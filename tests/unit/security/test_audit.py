"""The audit log: JSON lines, 0600, created with its directory, appended, reopened after rotation."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from sluicegate.security.audit import AuditLog, AuditRecord, rfc3339
from sluicegate.security.identity import Principal

ALICE = Principal("alice", frozenset({"dev", "a"}), "certificate")


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_lines_fields_mode_and_directory(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "audit.log"
    log = AuditLog(str(path), clock=lambda: 1764024067.123)
    log.record(AuditRecord(ALICE, "create", "Workload", "team-a", "w1", "allowed", "ipv4:127.0.0.1:5", detail="created"))
    log.write([
        AuditRecord(ALICE, "delete", "Workload", "team-b", "w2", "denied", "ipv4:127.0.0.1:5", code="PERMISSION_DENIED",
                    message="no"),
        AuditRecord(ALICE, "update", "ClusterQueue", "", "cq", "error", "", code="INVALID_ARGUMENT", message="bad"),
    ])
    log.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    got = lines(path)
    assert got[0] == {"time": "2025-11-24T22:41:07.123Z", "user": "alice", "groups": ["a", "dev"], "verb": "create",
                      "kind": "Workload", "namespace": "team-a", "name": "w1", "outcome": "allowed",
                      "detail": "created", "source": "ipv4:127.0.0.1:5"}
    assert (got[1]["outcome"], got[1]["code"], got[1]["message"]) == ("denied", "PERMISSION_DENIED", "no")
    assert (got[2]["kind"], got[2]["namespace"], got[2]["outcome"]) == ("ClusterQueue", "", "error")


def test_appends_to_an_existing_file_and_follows_rotation(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    path.write_text('{"old": true}\n')
    os.chmod(path, 0o600)
    log = AuditLog(str(path))
    rec = AuditRecord(ALICE, "delete", "Workload", "team-a", "w", "allowed")
    log.record(rec)
    os.rename(path, tmp_path / "audit.log.1")
    log.record(rec)  # still the old file until reopened
    log.reopen()
    log.record(rec)
    log.close()
    assert len(lines(tmp_path / "audit.log.1")) == 3
    assert len(lines(path)) == 1
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_rfc3339() -> None:
    assert rfc3339(0.5) == "1970-01-01T00:00:00.500Z"


def test_a_line_is_what_json_dumps_writes_for_the_record() -> None:
    """Lines are written from their strings (a bulk creation writes one per workload); the text is
    json.dumps's, whatever the strings hold."""
    odd = ['say "no"', "back\\slash", "line\nbreak\ttab\x00nul\x1f", "é ☃ 𝄞", "", "</script>", "\u2028"]
    for i, text in enumerate(odd):
        who = Principal(text or "u", frozenset(odd[:i]), "token")
        rec = AuditRecord(who, "create", "Workload", text, text[::-1], "error", text, code=text and "INTERNAL",
                          message=text, detail=text)
        expected: dict[str, object] = {"time": "2025-11-24T22:41:07.123Z", "user": who.user,
                                       "groups": sorted(who.groups), "verb": "create", "kind": "Workload",
                                       "namespace": text, "name": text[::-1], "outcome": "error"}
        for key in ("code", "message", "detail"):
            if getattr(rec, key):
                expected[key] = getattr(rec, key)
        expected["source"] = text
        assert rec.line(1764024067.123) == json.dumps(expected, separators=(",", ":"), ensure_ascii=False) + "\n"
