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
import shutil
import statistics
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


Runner = Callable[[int, int], float]  # (objects per commit, commits) -> rows/s


def runners(server: PostgresServer, tmp: str, ids: Counter) -> dict[str, Runner]:
    """Every backend and driver measured, each on a store or database of its own."""

    def sqlite(sync: str) -> Runner:
        def run(per_commit: int, commits: int) -> float:
            store = SqliteStore(os.path.join(tmp, f"{sync}-{ids.next()}.db"), synchronous=sync)
            try:
                return run_store(store, per_commit, commits, ids)
            finally:
                store.close()

        return run

    def postgres_store(unix: bool) -> Runner:
        def run(per_commit: int, commits: int) -> float:
            url = server.create_database()
            store = PostgresStore(server.socket_url(url.rsplit("/", 1)[1]) if unix else url)
            try:
                return run_store(store, per_commit, commits, ids)
            finally:
                store.close()

        return run

    def fresh() -> str:
        url = server.create_database()
        PostgresStore(url).close()  # the schema
        return url

    out: dict[str, Runner] = {
        "sqlite (NORMAL)": sqlite("NORMAL"),
        "sqlite (FULL)": sqlite("FULL"),
        "PostgresStore psycopg unnest (tcp)": postgres_store(False),
        "PostgresStore psycopg unnest (unix)": postgres_store(True),
        "psycopg executemany pipeline (tcp)": lambda p, c: run_psycopg_executemany(fresh(), p, c, ids),
    }
    try:
        import asyncpg  # type: ignore[import-not-found, import-untyped, unused-ignore]  # noqa: F401
    except ImportError:
        print("asyncpg not installed: not compared (pip install asyncpg into the venv to compare)")
        return out
    out["asyncpg executemany (tcp)"] = lambda p, c: run_asyncpg(fresh(), p, c, ids, unnest=False)
    out["asyncpg unnest (tcp)"] = lambda p, c: run_asyncpg(fresh(), p, c, ids, unnest=True)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="measure everything N times, interleaved; report the median")
    p.add_argument("--no-fsync", action="store_true", help="PostgreSQL without fsync: driver and protocol costs only")
    ns = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="sluicegate-bench-")
    server = PostgresServer(fsync=not ns.no_fsync)
    figures: dict[tuple[str, str], list[float]] = {}
    try:
        print(f"SQLite file: {tmp} on {filesystem(tmp)}")
        print(f"PostgreSQL {server.version()}: private server, fsync {'off' if ns.no_fsync else 'on'}, data on "
              f"{filesystem(str(server.data))}; tcp 127.0.0.1:{server.port}, unix socket {server.sockets}")
        ids = Counter()
        backends = runners(server, tmp, ids)
        for _ in range(ns.rounds):  # interleaved, so that a noisy moment hits every backend alike
            for shape, (per_commit, commits) in SHAPES.items():
                for name, run in backends.items():
                    figures.setdefault((name, shape), []).append(run(per_commit, commits))
    finally:
        server.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'backend':<38}" + "".join(f"{shape:>14}" for shape in SHAPES) + "   (rows/s, median of "
          f"{ns.rounds})")
    for name in dict.fromkeys(n for n, _ in figures):
        print(f"{name:<38}" + "".join(f"{statistics.median(figures[(name, shape)]):>14,.0f}" for shape in SHAPES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
