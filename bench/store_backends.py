#!/usr/bin/env python3
"""Store write throughput per backend, in the shapes the controller writes.

Shapes (each object a ~3 KiB JSON body, like a stored Workload):
- ``single``: one object per write, one commit each (an API create outside a group);
- ``batch100`` / ``batch1000``: a write group of 100 / 1,000 one-object
  writes, one commit at its end (a scheduling cycle, a batch of agent reports).

Backends: SQLite (``SqliteStore``, WAL, synchronous=NORMAL and FULL),
PostgreSQL through ``PostgresStore`` (psycopg 3: one ``unnest`` upsert per
commit), and for the choice of driver the same upsert through psycopg's
``executemany`` (pipeline mode) and, if importable, asyncpg (``executemany``
and the same ``unnest`` statement).  PostgreSQL is a private server started
for the run (``tests/pg.py``) with fsync on, reached over TCP on 127.0.0.1
and over its Unix socket.  Not a test: it prints rows/s.

    .venv/bin/python bench/store_backends.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sluicegate.controller.store import Put  # noqa: E402
from sluicegate.controller.store.postgres import PostgresStore  # noqa: E402
from sluicegate.controller.store.sqlite import SqliteStore  # noqa: E402
from tests.pg import PostgresServer  # noqa: E402

SHAPES = {"single": (1, 400), "batch100": (100, 20), "batch1000": (1000, 4)}  # objects per commit, commits
_UPSERT = (
    "INSERT INTO sluicegate_objects (kind, namespace, name, body, resource_version) VALUES ($1, $2, $3, $4, $5) "
    "ON CONFLICT (kind, namespace, name) DO UPDATE SET body = excluded.body, "
    "resource_version = excluded.resource_version, deleted_at = NULL"
)
_UNNEST = (
    "INSERT INTO sluicegate_objects (kind, namespace, name, body, resource_version) "
    "SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::bigint[]) "
    "ON CONFLICT (kind, namespace, name) DO UPDATE SET body = excluded.body, "
    "resource_version = excluded.resource_version, deleted_at = NULL"
)


def make_body(i: int) -> bytes:
    """A Workload-like JSON document of about 3 KiB."""
    doc = {
        "apiVersion": "sluicegate.io/v1beta2", "kind": "Workload",
        "metadata": {"name": f"wl-{i}", "namespace": "team-a", "uid": f"{i:032x}", "generation": 1,
                     "labels": {f"label-{j}": f"value-{i}-{j}" for j in range(8)}},
        "spec": {"queueName": "lq", "priority": i % 7, "podSets": [{"name": "main", "count": 4, "template": {"spec": {
            "containers": [{"name": "c", "command": ["python3", "-c", "print('x' * 100)"],
                            "env": [{"name": f"E{j}", "value": f"{i}-{j}" * 4} for j in range(12)],
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}]},
        "status": {"conditions": [{"type": t, "status": "True", "reason": t, "message": f"{t} at cycle {i} " * 6,
                                   "lastTransitionTime": "2026-11-25T00:00:00Z"} for t in ("QuotaReserved", "Admitted", "PodsReady")],
                   "admission": {"clusterQueue": "cq", "podSetAssignments": [
                       {"name": "main", "flavors": {"cpu": "default", "memory": "default"}, "count": 4,
                        "resourceUsage": {"cpu": "4", "memory": "4Gi"}}]}},
    }
    raw = json.dumps(doc).encode()
    return raw + b" " * max(0, 3072 - len(raw))


# Made once: the measurement is of the store, not of json.dumps.
BODIES = [make_body(i) for i in range(997)]


def body(i: int) -> bytes:
    return BODIES[i % len(BODIES)]


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n


def run_store(store: SqliteStore | PostgresStore, per_commit: int, commits: int, ids: Counter) -> float:
    t0 = time.perf_counter()
    for _ in range(commits):
        with store.group():
            for _ in range(per_commit):
                i = ids.next()
                store.write([Put("Workload", "team-a", f"wl-{i % 5000}", body(i))])
    return per_commit * commits / (time.perf_counter() - t0)


def run_psycopg_executemany(url: str, per_commit: int, commits: int, ids: Counter) -> float:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        sql = _UPSERT.replace("$1", "%s").replace("$2", "%s").replace("$3", "%s").replace("$4", "%s").replace("$5", "%s")
        t0 = time.perf_counter()
        for _ in range(commits):
            with conn.transaction(), conn.cursor() as cur:
                rows = []
                for _ in range(per_commit):
                    i = ids.next()
                    rows.append(("Workload", "team-a", f"wl-{i % 5000}", body(i), i))
                cur.executemany(sql.encode(), rows)  # pipeline mode (psycopg >= 3.1)
        return per_commit * commits / (time.perf_counter() - t0)


def run_asyncpg(dsn: str, per_commit: int, commits: int, ids: Counter, *, unnest: bool) -> float:
    import asyncpg  # type: ignore[import-not-found, import-untyped, unused-ignore]

    async def go() -> float:
        conn = await asyncpg.connect(dsn)
        try:
            t0 = time.perf_counter()
            for _ in range(commits):
                rows = []
                for _ in range(per_commit):
                    i = ids.next()
                    rows.append(("Workload", "team-a", f"wl-{i % 5000}", body(i), i))
                async with conn.transaction():
                    if unnest:
                        await conn.execute(_UNNEST, *(list(col) for col in zip(*rows, strict=True)))
                    else:
                        await conn.executemany(_UPSERT, rows)
            return per_commit * commits / (time.perf_counter() - t0)
        finally:
            await conn.close()

    return asyncio.run(go())


def filesystem(path: str) -> str:
    """The mount (device, type) that holds ``path``."""
    best = ("?", "?", "")
    with open("/proc/mounts") as f:
        for line in f:
            dev, mnt, fstype = line.split()[:3]
            if os.path.realpath(path).startswith(mnt.rstrip("/") + "/") and len(mnt) >= len(best[2]):
                best = (dev, fstype, mnt)
    return f"{best[1]} on {best[0]} (mounted at {best[2]})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=1, help="repeat every measurement N times and keep the best")
    ns = p.parse_args()
    results: list[tuple[str, str, float]] = []
    tmp = tempfile.mkdtemp(prefix="sluicegate-bench-")
    server = PostgresServer(fsync=True)
    try:
        print(f"SQLite file: {tmp} on {filesystem(tmp)}")
        print(f"PostgreSQL: private server (fsync on, synchronous_commit on) data {server.data} on {filesystem(str(server.data))}; "
              f"tcp 127.0.0.1:{server.port} and unix socket {server.sockets}")
        ids = Counter()

        def measure(name: str, shape: str, fn: Callable[[], float]) -> None:
            best = max(fn() for _ in range(ns.rounds))
            results.append((name, shape, best))
            print(f"  {name:<34} {shape:<10} {best:>10,.0f} rows/s", flush=True)

        for shape, (per_commit, commits) in SHAPES.items():
            for sync in ("NORMAL", "FULL"):
                sq = SqliteStore(os.path.join(tmp, f"{shape}-{sync}.db"), synchronous=sync)
                measure(f"sqlite ({sync})", shape, lambda s=sq: run_store(s, per_commit, commits, ids))  # type: ignore[misc]
                sq.close()
            for where, url in (("tcp", server.create_database()), ("unix", server.socket_url(server.create_database().rsplit("/", 1)[1]))):
                pg = PostgresStore(url)
                measure(f"PostgresStore psycopg unnest ({where})", shape, lambda s=pg: run_store(s, per_commit, commits, ids))  # type: ignore[misc]
                pg.close()
            url = server.create_database()
            PostgresStore(url).close()
            measure("psycopg executemany pipeline (tcp)", shape, lambda u=url: run_psycopg_executemany(u, per_commit, commits, ids))  # type: ignore[misc]
            try:
                import asyncpg  # type: ignore[import-not-found, import-untyped, unused-ignore]  # noqa: F401
            except ImportError:
                print("  asyncpg not installed: skipped (pip install asyncpg into the venv to compare)")
                continue
            for unnest in (False, True):
                url = server.create_database()
                PostgresStore(url).close()
                label = "asyncpg unnest (tcp)" if unnest else "asyncpg executemany (tcp)"
                measure(label, shape, lambda u=url, n=unnest: run_asyncpg(u, per_commit, commits, ids, unnest=n))  # type: ignore[misc]
    finally:
        server.close()
    print(json.dumps([{"backend": b, "shape": s, "rows_per_s": round(r)} for b, s, r in results]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
