#!/usr/bin/env python3
"""Failover: the time from kill -9 of the leading controller to the first admission by the new leader.

Starts a private PostgreSQL (``tests/pg.py``, fsync on), two controllers on
it with the default lease settings (leaseDuration 15s, renew every 2s,
followers check every 0.5s), in quota-only mode so that admissions alone are
measured, and a ClusterQueue with ample quota.  Then, ``--rounds`` times: a
workload is created and admitted under the current leader, the leader is
killed with SIGKILL, and a client that knows both addresses creates a probe
workload at once and polls until it is admitted.  Printed per round: time
until the follower reports itself leader (``/readyz``), until the probe was
accepted, and until it was admitted; then p50 and max.  The killed
controller is restarted as a follower before the next round.

    .venv/bin/python bench/ha_failover.py --rounds 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sluicegate.client import Client, ClientError, Document  # noqa: E402
from sluicegate.manifest.loader import parse_text  # noqa: E402
from tests.integration.harness import Controller  # noqa: E402
from tests.pg import PostgresServer  # noqa: E402

QUEUES = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 100000}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
"""


def workload(name: str) -> Document:
    return Document(body=f"""
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {{name: {name}, namespace: default}}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          command: ["true"]
          resources: {{requests: {{cpu: "1"}}}}
""", source=f"{name}.yaml")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def role(c: Controller) -> str:
    try:
        with urllib.request.urlopen(f"http://{c.health}/readyz", timeout=1) as r:
            return str(json.loads(r.read())["reason"]).split(" ")[0].rstrip(":")
    except urllib.error.HTTPError as exc:
        return str(json.loads(exc.read())["reason"]).split(" ")[0].rstrip(":")
    except OSError:
        return "down"


def admitted(w: dict[str, object]) -> bool:
    status = w.get("status") or {}
    assert isinstance(status, dict)
    return any(c.get("type") == "QuotaReserved" and c.get("status") == "True" for c in status.get("conditions", []))


async def admit(c: Client, name: str, deadline: float) -> tuple[float, float]:
    """Create ``name`` and wait until it is admitted: (seconds until accepted, until admitted), from now."""
    t0 = time.monotonic()
    await c.create_workload(workload(name))
    accepted = time.monotonic() - t0
    for _ in range(100_000):
        try:
            if admitted(await c.get_workload(name)):
                return accepted, time.monotonic() - t0
        except ClientError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} not admitted")
        await asyncio.sleep(0.01)
    raise TimeoutError(f"{name} not admitted")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    pg = PostgresServer(fsync=True)
    work = Path(tempfile.mkdtemp(prefix="sg-ha-bench-"))
    url = pg.create_database()
    controllers = []
    for name in ("a", "b"):
        d = work / name
        d.mkdir()
        controllers.append(Controller(d, extra=["--store", url, "--listen", f"127.0.0.1:{free_port()}",
                                                "--no-placement"]))
    try:
        for c in controllers:
            c.start()
        addresses = ",".join(c.address for c in controllers)
        rows: list[tuple[float, float, float]] = []
        async with Client(addresses, timeout=60) as client:
            docs = parse_text(QUEUES, "queues.yaml")
            await client.apply([Document(body=json.dumps(d.body), source=d.source) for d in docs])
            for i in range(args.rounds):
                await admit(client, f"warm-{i}", time.monotonic() + 60)
                leader = next(c for c in controllers if role(c) == "leader")
                other = next(c for c in controllers if c is not leader)
                t_kill = time.monotonic()
                leader.kill9()
                probe = asyncio.create_task(admit(client, f"probe-{i}", t_kill + 120))
                took_over = None
                for _ in range(100_000):
                    if role(other) == "leader":
                        took_over = time.monotonic() - t_kill
                        break
                    if time.monotonic() - t_kill > 120:
                        break
                    await asyncio.sleep(0.01)
                accepted, admitted_after = await probe
                rows.append((took_over or float("nan"), accepted, admitted_after))
                print(f"round {i + 1}: leader after {rows[-1][0]:.2f}s, probe accepted after {accepted:.2f}s, "
                      f"admitted after {admitted_after:.2f}s", flush=True)
                leader.start()  # back as a follower, on the same port
        for label, idx in (("leader elected", 0), ("probe accepted", 1), ("first admission", 2)):
            values = [r[idx] for r in rows]
            print(f"{label:16s} p50 {statistics.median(values):.2f}s  max {max(values):.2f}s  (n={len(values)})")
        print("store: PostgreSQL 127.0.0.1 (TCP), fsync on; default lease settings (15s/10s/2s/0.5s)")
    finally:
        for c in controllers:
            c.stop()
        pg.close()


if __name__ == "__main__":
    asyncio.run(main())
