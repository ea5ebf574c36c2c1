"""``sluicegate-controller migrate | backup``: moving a cluster's state between stores, and backing it up.

``migrate --from URL --to URL`` copies every object (its stored bytes and
resource version) and every meta entry from one store to another (SQLite
file or PostgreSQL, either way), in one transaction on the destination; the
leader lease is not copied.  A destination that holds anything is refused
unless ``--force``, which replaces its content.  The copy is verified: the
objects per kind and a digest of every (kind, namespace, name, version,
body) are read back from the destination and compared; a mismatch exits 1.

``backup --store URL --out FILE.db`` writes a consistent copy into a new
SQLite file while the controller keeps running: SQLite's online backup for
a SQLite store, one REPEATABLE READ transaction for PostgreSQL.  Restoring
is the same for both backends: ``migrate --from FILE.db --to URL``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence

from sluicegate.controller.store import Portable, Snapshot, StoreError, open_store
from sluicegate.controller.store.base import POSTGRES_SCHEMES, redact, sqlite_path
from sluicegate.controller.store.sqlite import SqliteStore, backup_file

COMMANDS = ("migrate", "backup")


class DataError(Exception):
    """A migrate or backup that cannot be done as asked; nothing was changed."""


def _open(url: str, *, password_file: str | None) -> Portable:
    store = open_store(url, password_file=password_file)
    if not isinstance(store, Portable):
        store.close()
        raise DataError(f"store {redact(url)}: cannot be copied")
    return store


def expected_counts(snapshot: Snapshot) -> dict[str, int]:
    counts = dict(Counter(o.kind for o in snapshot.objects))
    if snapshot.meta:
        counts["(meta)"] = len(snapshot.meta)
    return counts


def digest(snapshot: Snapshot) -> str:
    """SHA-256 over every object's key, version and bytes, and every meta entry, in a fixed order."""
    h = hashlib.sha256()
    for o in sorted(snapshot.objects, key=lambda o: (o.kind, o.namespace, o.name)):
        for part in (o.kind, o.namespace, o.name, str(o.resource_version)):
            h.update(part.encode() + b"\0")
        h.update(len(o.body).to_bytes(8, "big") + o.body)
    for key, value in sorted(snapshot.meta.items()):
        h.update(key.encode() + b"\0" + value.encode() + b"\0")
    return h.hexdigest()


def _report(out: Callable[[str], None], source: dict[str, int], copied: dict[str, int]) -> bool:
    out(f"{'KIND':<24} {'SOURCE':>10} {'COPIED':>10}")
    for kind in sorted(set(source) | set(copied)):
        mark = "" if source.get(kind, 0) == copied.get(kind, 0) else "   MISMATCH"
        out(f"{kind:<24} {source.get(kind, 0):>10} {copied.get(kind, 0):>10}{mark}")
    return source == copied


def migrate(
    source_url: str,
    destination_url: str,
    *,
    force: bool = False,
    source_password_file: str | None = None,
    destination_password_file: str | None = None,
    out: Callable[[str], None] = print,
) -> bool:
    """Copy ``source_url``'s content into ``destination_url``; True when the copy verifies."""
    if source_url == destination_url:
        raise DataError("--from and --to name the same store")
    source_path = sqlite_path(source_url)
    if source_path is not None and not os.path.exists(source_path):
        # Opening it would make an empty store, and copy that (--force: over the destination's content).
        raise DataError(f"--from {source_path}: no such file")
    source = _open(source_url, password_file=source_password_file)
    try:
        destination = _open(destination_url, password_file=destination_password_file)
        try:
            existing = destination.counts()
            if existing and not force:
                held = ", ".join(f"{n} {k}" for k, n in sorted(existing.items()))
                raise DataError(
                    f"destination {redact(destination_url)} is not empty ({held}); --force replaces its content"
                )
            snapshot = source.snapshot()
            destination.replace_all(snapshot)
        finally:
            destination.close()
    finally:
        source.close()
    # Verified through a new connection, as the next controller will read it.
    check = _open(destination_url, password_file=destination_password_file)
    try:
        copied = check.snapshot()
    finally:
        check.close()
    counts_match = _report(out, expected_counts(snapshot), expected_counts(copied))
    same = digest(snapshot) == digest(copied) and copied.version >= snapshot.version
    out(
        f"copied {len(snapshot.objects)} objects and {len(snapshot.meta)} meta entries at resource version "
        f"{snapshot.version} from {redact(source_url)} to {redact(destination_url)}: "
        + ("verified" if counts_match and same else "VERIFICATION FAILED")
    )
    return counts_match and same


def backup(
    store_url: str,
    out_path: str,
    *,
    force: bool = False,
    password_file: str | None = None,
    out: Callable[[str], None] = print,
) -> Snapshot:
    """Write a consistent copy of ``store_url`` into the SQLite file ``out_path``; returns what it holds."""
    if os.path.exists(out_path) and not force:
        raise DataError(f"--out {out_path} exists; --force replaces it")
    partial = f"{out_path}.partial-{os.getpid()}"
    try:
        if store_url.startswith(POSTGRES_SCHEMES):
            source = _open(store_url, password_file=password_file)
            try:
                snapshot = source.snapshot()
            finally:
                source.close()
            target = SqliteStore(partial)
            try:
                target.replace_all(snapshot)
            finally:
                target.close()
        else:
            path = sqlite_path(store_url)
            if path is None:
                raise DataError(f"--store {redact(store_url)}: not a store URL")
            backup_file(path, partial)
        # Read back as a restore will read it (SQLite removes -wal and -shm when it closes).
        check = SqliteStore(partial)
        try:
            written = check.snapshot()
        finally:
            check.close()
        os.replace(partial, out_path)
    finally:
        for leftover in (partial, partial + "-wal", partial + "-shm"):
            if os.path.exists(leftover):
                os.unlink(leftover)
    counts = expected_counts(written)
    for kind, n in sorted(counts.items()):
        out(f"{kind:<24} {n:>10}")
    out(
        f"backed up {len(written.objects)} objects at resource version {written.version} "
        f"from {redact(store_url)} to {out_path}; restore: sluicegate-controller migrate --from {out_path} --to URL"
    )
    return written


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="sluicegate-controller", description="Move or back up the controller's store.")
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser(
        "migrate",
        help="copy every object and meta entry from one store to another (stop the controller first)",
        description="Store URLs: postgresql://..., sqlite:PATH, sqlite:///PATH or a plain path.",
    )
    m.add_argument("--from", dest="source", required=True, metavar="URL", help="the store to copy")
    m.add_argument("--to", dest="destination", required=True, metavar="URL", help="the store to fill")
    m.add_argument("--force", action="store_true", help="replace the destination's content if it has any")
    m.add_argument("--from-password-file", help="PostgreSQL password for --from (else the URL, PGPASSWORD, ~/.pgpass)")
    m.add_argument("--to-password-file", help="PostgreSQL password for --to")
    b = sub.add_parser(
        "backup",
        help="write a consistent copy of the store into a new SQLite file (the controller may keep running)",
        description="Restore with: sluicegate-controller migrate --from FILE.db --to URL",
    )
    b.add_argument("--store", required=True, metavar="URL", help="the store to back up (the controller's 'store')")
    b.add_argument("--out", required=True, metavar="FILE.db", help="the SQLite file to write")
    b.add_argument("--force", action="store_true", help="replace FILE.db if it exists")
    b.add_argument("--password-file", help="PostgreSQL password (else the URL, PGPASSWORD, ~/.pgpass)")
    ns = p.parse_args(argv)
    try:
        if ns.command == "migrate":
            ok = migrate(
                ns.source,
                ns.destination,
                force=ns.force,
                source_password_file=ns.from_password_file,
                destination_password_file=ns.to_password_file,
            )
            return 0 if ok else 1
        backup(ns.store, ns.out, force=ns.force, password_file=ns.password_file)
        return 0
    except (DataError, StoreError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
