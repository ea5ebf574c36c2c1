"""sluicectl: apply manifests, submit and inspect workloads, simulate a cycle.

Every failure ends with a one-line ``error: ...`` on stderr and a non-zero
exit code (1 for a refused request, 2 for bad usage, 3 for an unreachable
controller).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import time
from collections.abc import Sequence
from typing import Any

import grpc
import yaml

from sluicegate import clientconfig
from sluicegate.client import Client, ClientError, Document, default_server
from sluicegate.manifest.errors import ManifestError
from sluicegate.manifest.loader import RawDocument, load_documents
from sluicegate.manifest.timefmt import parse_duration, parse_rfc3339


class UsageError(Exception):
    pass


def _one_line(text: str) -> str:
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


# ---------------------------------------------------------------- rendering


def _age(meta: dict[str, Any]) -> str:
    ts = meta.get("creationTimestamp")
    if not ts:
        return "-"
    secs = max(0, int(time.time() - parse_rfc3339(ts)))
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= n:
            return f"{secs // n}{unit}"
    return f"{secs}s"


def _cond(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for c in obj.get("status", {}).get("conditions", []) or []:
        if c.get("type") == type_:
            return dict(c)
    return None


def _is_true(obj: dict[str, Any], type_: str) -> bool:
    c = _cond(obj, type_)
    return c is not None and c.get("status") == "True"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]
    lines = ["   ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)


def _workload_row(o: dict[str, Any]) -> list[str]:
    meta, spec, st = o["metadata"], o.get("spec", {}), o.get("status", {})
    adm = st.get("admission") or {}
    finished = _cond(o, "Finished")
    state = "Finished" if finished and finished.get("status") == "True" else (
        "Inactive" if spec.get("active") is False else (
            "Admitted" if _is_true(o, "Admitted") else ("QuotaReserved" if _is_true(o, "QuotaReserved") else "Pending")
        )
    )
    return [
        meta.get("namespace", ""),
        meta["name"],
        spec.get("queueName", ""),
        adm.get("clusterQueue", ""),
        state,
        str(spec.get("priority", 0)),
        _age(meta),
    ]


def render_table(kind: str, objs: list[dict[str, Any]]) -> str:
    k = kind.lower()
    if k in ("workload", "workloads", "wl"):
        return _table(
            ["NAMESPACE", "NAME", "QUEUE", "RESERVED IN", "STATE", "PRIORITY", "AGE"], [_workload_row(o) for o in objs]
        )
    if k in ("clusterqueue", "clusterqueues", "cq"):
        rows = []
        for o in objs:
            spec, st = o.get("spec", {}), o.get("status", {})
            rows.append(
                [
                    o["metadata"]["name"],
                    spec.get("cohortName", ""),
                    spec.get("queueingStrategy", "BestEffortFIFO"),
                    str(st.get("pendingWorkloads", 0)),
                    str(st.get("reservingWorkloads", 0)),
                    str(st.get("admittedWorkloads", 0)),
                    "True" if _is_true(o, "Active") else "False",
                ]
            )
        return _table(["NAME", "COHORT", "STRATEGY", "PENDING", "RESERVING", "ADMITTED", "ACTIVE"], rows)
    if k in ("localqueue", "localqueues", "lq", "queue", "queues"):
        rows = [
            [
                o["metadata"].get("namespace", ""),
                o["metadata"]["name"],
                o.get("spec", {}).get("clusterQueue", ""),
                str(o.get("status", {}).get("pendingWorkloads", 0)),
                str(o.get("status", {}).get("admittedWorkloads", 0)),
            ]
            for o in objs
        ]
        return _table(["NAMESPACE", "NAME", "CLUSTERQUEUE", "PENDING", "ADMITTED"], rows)
    if k in ("resourceflavor", "resourceflavors", "flavor", "flavors", "rf"):
        rows = [
            [
                o["metadata"]["name"],
                ",".join(f"{a}={b}" for a, b in sorted((o.get("spec", {}).get("nodeLabels") or {}).items()))
                or "<none>",
            ]
            for o in objs
        ]
        return _table(["NAME", "NODE LABELS"], rows)
    if k in ("cohort", "cohorts"):
        rows = [[o["metadata"]["name"], o.get("spec", {}).get("parentName", "")] for o in objs]
        return _table(["NAME", "PARENT"], rows)
    rows = [[o["metadata"].get("namespace", ""), o["metadata"]["name"]] for o in objs]
    return _table(["NAMESPACE", "NAME"], rows)


def render(kind: str, objs: list[dict[str, Any]], output: str, single: bool) -> str:
    if output == "json":
        return json.dumps(objs[0] if single else {"items": objs}, indent=2)
    if output == "yaml":
        return yaml.safe_dump(objs[0] if single else {"items": objs}, sort_keys=False).rstrip()
    if output == "name":
        return "\n".join(f"{kind.lower()}/{o['metadata']['name']}" for o in objs)
    return render_table(kind, objs)


def describe_workload(o: dict[str, Any]) -> str:
    meta, spec, st = o["metadata"], o.get("spec", {}), o.get("status", {})
    out = [
        f"Name:          {meta['name']}",
        f"Namespace:     {meta.get('namespace', '')}",
        f"UID:           {meta.get('uid', '')}",
        f"Created:       {meta.get('creationTimestamp', '')}",
        f"Queue:         {spec.get('queueName', '')}",
        f"Priority:      {spec.get('priority', 0)}",
        f"Active:        {spec.get('active', True)}",
        "Pod sets:",
    ]
    for ps in spec.get("podSets", []):
        out.append(
            f"  {ps.get('name', 'main')}: count={ps.get('count', 1)}"
            + (f" minCount={ps['minCount']}" if "minCount" in ps else "")
        )
        for c in ps.get("template", {}).get("spec", {}).get("containers", []):
            cmd = shlex.join([*c.get("command", []), *c.get("args", [])])
            req = c.get("resources", {}).get("requests", {})
            out.append(f"    {c.get('name')}: {cmd}  requests={json.dumps(req)}")
    adm = st.get("admission")
    if adm:
        out.append(f"Admission:     ClusterQueue {adm.get('clusterQueue')}")
        for psa in adm.get("podSetAssignments", []):
            flv = ", ".join(f"{r}={f}" for r, f in sorted((psa.get("flavors") or {}).items()))
            use = ", ".join(f"{r}={q}" for r, q in sorted((psa.get("resourceUsage") or {}).items()))
            out.append(f"  {psa.get('name')}: count={psa.get('count')} flavors[{flv}] usage[{use}]")
    else:
        qr = _cond(o, "QuotaReserved")
        out.append("Admission:     <none>")
        if qr and qr.get("status") == "False":
            out.append(f"Pending:       {qr.get('message', '')}")
    pods = (st.get("extra") or {}).get("pods") or []
    if pods:
        out.append("Pods:")
        for p in pods:
            code = f" exit={p['exitCode']}" if p.get("exitCode") is not None else ""
            why = f" ({p['reason']})" if p.get("reason") else ""
            out.append(
                f"  {p['name']:<28} node={p['node']:<14} {p.get('phase', ''):<10} qos={p.get('qosClass', '-') or '-'}"
                f"{code}{why}"
            )
    reclaim = st.get("reclaimablePods")
    if reclaim:
        out.append("Reclaimable:   " + ", ".join(f"{r['name']}={r['count']}" for r in reclaim))
    rs = st.get("requeueState")
    if rs:
        out.append(f"Requeue state: count={rs.get('count', 0)} requeueAt={rs.get('requeueAt', '-')}")
    out.append("Conditions:")
    for c in st.get("conditions", []) or []:
        out.append(
            f"  {c.get('type'):<14} {c.get('status'):<6} {c.get('reason', ''):<22} "
            f"{c.get('lastTransitionTime', '')}  {c.get('message', '')}"
        )
    return "\n".join(out)


# ----------------------------------------------------------------- commands


def _docs(files: Sequence[str]) -> list[RawDocument]:
    if not files:
        raise UsageError("no manifest given: use -f FILE or -f DIR")
    return load_documents(list(files))


def _to_client_docs(docs: Sequence[RawDocument]) -> list[Document]:
    return [Document(body=json.dumps(d.body), source=d.source) for d in docs]


async def cmd_apply(c: Client, ns: argparse.Namespace) -> int:
    results = await c.apply(_to_client_docs(_docs(ns.filename)), dry_run=ns.dry_run)
    suffix = " (dry run)" if ns.dry_run else ""
    for kind, namespace, name, action in results:
        where = f"{namespace}/{name}" if namespace else name
        print(f"{kind.lower()}/{where} {action}{suffix}")
    return 0


async def cmd_create(c: Client, ns: argparse.Namespace) -> int:
    docs = _docs(ns.filename)
    others = [d for d in docs if d.body.get("kind") != "Workload"]
    if others:
        planned = await c.apply(_to_client_docs(others), dry_run=True)
        exists = [f"{k}/{n}" for k, _, n, a in planned if a != "created"]
        if exists:
            raise UsageError(f"already exists: {', '.join(exists)} (use apply to update)")
        await c.apply(_to_client_docs(others))
        for k, namespace, n, _ in planned:
            print(f"{k.lower()}/{namespace + '/' if namespace else ''}{n} created")
    for d in docs:
        if d.body.get("kind") != "Workload":
            continue
        wl, created = await c.create_workload(Document(body=json.dumps(d.body), source=d.source))
        m = wl["metadata"]
        print(f"workload/{m['namespace']}/{m['name']} {'created' if created else 'unchanged (already exists)'}")
    return 0


async def cmd_get(c: Client, ns: argparse.Namespace) -> int:
    kind = ns.kind
    namespace = "" if ns.all_namespaces else ns.namespace
    if kind.lower() in ("node", "nodes", "no"):
        nodes = await c.list_nodes()
        if ns.name:
            nodes = [n for n in nodes if n["name"] == ns.name]
            if not nodes:
                raise UsageError(f"node {ns.name} not found")
        print(render_nodes(nodes, ns.output))
        return 0
    if ns.watch:
        if kind.lower() not in ("workload", "workloads", "wl"):
            raise UsageError("--watch is supported for workloads")
        async for etype, wl in c.watch_workloads(namespace=namespace, name=ns.name or ""):
            if ns.output in ("json", "yaml"):
                print(render("workload", [wl], ns.output, True), flush=True)
            else:
                print(etype.ljust(9) + "   ".join(_workload_row(wl)), flush=True)
        return 0
    if ns.name:
        obj = await c.get(kind, ns.name, ns.namespace)
        print(render(kind, [obj], ns.output, True))
        return 0
    if kind.lower() in ("workload", "workloads", "wl"):
        objs = await c.list_workloads(namespace=namespace, label_selector=ns.selector or "", state=ns.state or "")
    else:
        objs = await c.list(kind, namespace, ns.selector or "")
    if not objs and ns.output == "table":
        print("No resources found", file=sys.stderr)
        return 0
    print(render(kind, objs, ns.output, False))
    return 0


def _fmt_res(resource: str, amount: int) -> str:
    from sluicegate.quantity import format_canonical

    return format_canonical(resource, amount)


def render_nodes(nodes: list[dict[str, Any]], output: str) -> str:
    if output == "json":
        return json.dumps({"items": nodes}, indent=2)
    if output == "yaml":
        return yaml.safe_dump({"items": nodes}, sort_keys=False).rstrip()
    rows = []
    for n in nodes:
        alloc, req, use = n["allocatable"], n["requested"], n["usage"]
        status = "Ready" if n["ready"] else "NotReady"
        if use["conditions"]:
            status += "," + ",".join(use["conditions"])
        rows.append(
            [
                n["name"],
                status,
                f"{_fmt_res('cpu', req.get('cpu', 0))}/{_fmt_res('cpu', alloc.get('cpu', 0))}",
                f"{_fmt_res('memory', req.get('memory', 0))}/{_fmt_res('memory', alloc.get('memory', 0))}",
                f"{use['cpuUsageCores']:.2f}",
                f"{use['memoryAvailable'] / 2**30:.1f}Gi" if use["memoryAvailable"] else "-",
                str(n["pods"]),
            ]
        )
    return _table(["NAME", "STATUS", "CPU REQ/ALLOC", "MEMORY REQ/ALLOC", "CPU USED", "MEM AVAILABLE", "PODS"], rows)


async def cmd_logs(c: Client, ns: argparse.Namespace) -> int:
    prefix = ns.prefix
    async for pod, container, data in c.logs(
        ns.workload, namespace=ns.namespace, pod=ns.pod or "", container=ns.container or "", follow=ns.follow
    ):
        if prefix:
            text = data.decode("utf-8", errors="replace")
            for line in text.splitlines(keepends=True):
                sys.stdout.write(f"[{pod}/{container}] {line}")
        else:
            sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


async def cmd_describe(c: Client, ns: argparse.Namespace) -> int:
    if ns.kind.lower() in ("workload", "workloads", "wl"):
        print(describe_workload(await c.get_workload(ns.name, ns.namespace)))
        return 0
    obj = await c.get(ns.kind, ns.name, ns.namespace)
    print(yaml.safe_dump(obj, sort_keys=False).rstrip())
    return 0


async def cmd_delete(c: Client, ns: argparse.Namespace) -> int:
    if ns.filename:
        for d in _docs(ns.filename):
            m = d.body.get("metadata")
            meta: dict[object, object] = m if isinstance(m, dict) else {}
            kind = str(d.body.get("kind", ""))
            await c.delete(kind, str(meta.get("name", "")), str(meta.get("namespace", "")))
            print(f"{kind.lower()}/{meta.get('name')} deleted")
        return 0
    if not ns.kind or not ns.names:
        raise UsageError("delete needs KIND NAME... or -f FILE")
    if ns.kind.lower() in ("node", "nodes", "no"):
        # A node is its certificates: revoking them cuts its stream and keeps it out.
        for name in ns.names:
            serials = await c.revoke_node(name)
            print(f"node/{name} deleted (certificates revoked: {', '.join(serials) or 'none'})")
        return 0
    for name in ns.names:
        await c.delete(ns.kind, name, ns.namespace)
        print(f"{ns.kind.lower()}/{name} deleted")
    return 0


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


async def cmd_token(c: Client, ns: argparse.Namespace) -> int:
    if ns.action == "create":
        ttl = parse_duration(ns.ttl) if ns.ttl else 0.0
        t = await c.create_token(ttl=ttl, uses=ns.uses, description=ns.description)
        if ns.print_join_command:
            print(
                f"sluicegate-agent join --controller {ns.join_address or c.server} --token {t['token']} "
                f"--ca-cert-hash {t['caCertHash']}"
            )
        else:
            print(t["token"])
            print(f"# expires {_when(t['expiresAt'])}, {t['usesLeft']} use(s); join with:", file=sys.stderr)
            print(
                f"#   sluicegate-agent join --controller TOKEN_PORT_ADDRESS --token {t['token']} "
                f"--ca-cert-hash {t['caCertHash']}",
                file=sys.stderr,
            )
        return 0
    if ns.action == "list":
        rows = [
            [t["id"], _when(t["expiresAt"]), str(t["usesLeft"]), t["createdBy"], t["description"]]
            for t in await c.list_tokens()
        ]
        print(_table(["ID", "EXPIRES", "USES-LEFT", "CREATED-BY", "DESCRIPTION"], rows))
        return 0
    if not ns.id:
        raise UsageError("token delete needs a token ID")
    for tid in ns.id:
        print(f"token/{tid} {'deleted' if await c.delete_token(tid) else 'not found'}")
    return 0


async def cmd_auth(c: Client, ns: argparse.Namespace) -> int:
    me = await c.whoami()
    print(
        f"user: {me['user']}\ngroups: {', '.join(me['groups']) or '-'}\nauthenticated by: {me['method']}"
        + (f"\ncertificate serial: {me['serial']}" if me["serial"] else "")
    )
    return 0


async def cmd_certs(c: Client, ns: argparse.Namespace) -> int:
    from pathlib import Path

    from sluicegate import clientconfig
    from sluicegate.security import pki

    if ns.action == "revoke":
        for serial in ns.serial:
            done = await c.revoke_certificate(serial)
            print(f"certificate {serial} {'revoked' if done else 'was already revoked'}")
        return 0
    if not ns.user or not ns.out:
        raise UsageError("certs issue needs --user and --out")
    key = pki.new_key()
    csr = pki.make_csr(key, ns.user, tuple(ns.group))
    ttl = parse_duration(ns.ttl) if ns.ttl else 0.0
    cert, ca, serial = await c.issue_user_certificate(ns.user, list(ns.group), csr, ttl=ttl)
    clientconfig.write(Path(ns.out), servers=[ns.for_server or c.server], ca=ca, cert=cert, key=pki.key_pem(key))
    print(
        f"wrote a client config for user {ns.user} (groups: {', '.join(ns.group) or '-'}; serial {serial}) to {ns.out}"
    )
    return 0


async def _set_stop(c: Client, kind: str, name: str, namespace: str, policy: str | None) -> None:
    obj = await c.get(kind, name, namespace)
    obj.pop("status", None)
    meta = obj.get("metadata", {})
    obj["metadata"] = {k: v for k, v in meta.items() if k in ("name", "namespace", "labels", "annotations")}
    spec = obj.setdefault("spec", {})
    if policy is None:
        spec.pop("stopPolicy", None)
    else:
        spec["stopPolicy"] = policy
    await c.apply([Document(body=json.dumps(obj), source=f"{kind}/{name}")])


async def cmd_stop_resume(c: Client, ns: argparse.Namespace, active: bool) -> int:
    k = ns.kind.lower()
    if k in ("workload", "workloads", "wl"):
        await c.set_active(ns.name, active, ns.namespace)
    elif k in ("clusterqueue", "cq", "localqueue", "lq"):
        policy = None if active else ("Hold" if ns.keep_already_running else "HoldAndDrain")
        await _set_stop(
            c, "ClusterQueue" if k in ("clusterqueue", "cq") else "LocalQueue", ns.name, ns.namespace, policy
        )
    else:
        raise UsageError(f"cannot stop/resume kind {ns.kind!r}: expected workload, clusterqueue or localqueue")
    print(f"{k}/{ns.name} {'resumed' if active else 'stopped'}")
    return 0


def build_run_workload(ns: argparse.Namespace) -> dict[str, Any]:
    if not ns.argv:
        raise UsageError("run needs a command after --")
    requests: dict[str, str] = {}
    if ns.cpu:
        requests["cpu"] = ns.cpu
    if ns.memory:
        requests["memory"] = ns.memory
    for extra in ns.request or []:
        if "=" not in extra:
            raise UsageError(f"--request expects RESOURCE=QUANTITY, got {extra!r}")
        r, q = extra.split("=", 1)
        requests[r] = q
    name = ns.name or f"run-{int(time.time() * 1000) % 10**10:010d}"
    container: dict[str, Any] = {"name": "main", "command": list(ns.argv), "resources": {"requests": requests}}
    if ns.limit_memory or ns.limit_cpu:
        container["resources"]["limits"] = {k: v for k, v in (("cpu", ns.limit_cpu), ("memory", ns.limit_memory)) if v}
    pod_set: dict[str, Any] = {
        "name": "main",
        "count": ns.count,
        "template": {"spec": {"containers": [container], "restartPolicy": "Never"}},
    }
    if ns.min_count:
        pod_set["minCount"] = ns.min_count
    spec: dict[str, Any] = {"queueName": ns.queue, "podSets": [pod_set]}
    if ns.priority_class:
        spec["priorityClassRef"] = {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": ns.priority_class,
        }
    return {
        "apiVersion": "sluicegate.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns.namespace},
        "spec": spec,
    }


async def cmd_run(c: Client, ns: argparse.Namespace) -> int:
    wl = build_run_workload(ns)
    obj, created = await c.create_workload(Document(body=json.dumps(wl), source="sluicectl run"))
    m = obj["metadata"]
    print(f"workload/{m['namespace']}/{m['name']} {'created' if created else 'unchanged (already exists)'}")
    return 0


def cmd_simulate(ns: argparse.Namespace) -> int:
    from sluicegate.controller.simulate import simulate

    result = simulate(_docs(ns.filename))
    print(json.dumps(result, indent=2))
    return 0


# ------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sluicectl", description="Talk to a sluicegate controller.")
    p.add_argument(
        "--server",
        default=None,
        help="controller gRPC address (default: $SLUICEGATE_SERVER, the config's first server, 127.0.0.1:7420)",
    )
    p.add_argument(
        "--config", default=None, help="client config file (default: $SLUICEGATE_CONFIG, ~/.config/sluicegate/config)"
    )
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each request (default %(default)s)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def nsopt(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("-n", "--namespace", default="default")

    a = sub.add_parser("apply", help="create or update objects from YAML/JSON files or directories")
    a.add_argument("-f", "--filename", action="append", default=[])
    a.add_argument("--dry-run", action="store_true")

    cr = sub.add_parser("create", help="create objects; workloads are idempotent by name")
    cr.add_argument("-f", "--filename", action="append", default=[])

    g = sub.add_parser("get", help="list or show objects")
    g.add_argument("kind")
    g.add_argument("name", nargs="?")
    nsopt(g)
    g.add_argument("-A", "--all-namespaces", action="store_true")
    g.add_argument("-o", "--output", choices=["table", "json", "yaml", "name"], default="table")
    g.add_argument("-l", "--selector")
    g.add_argument("--state", help="workloads only: Pending|QuotaReserved|Admitted|Finished|Inactive")
    g.add_argument("-w", "--watch", action="store_true", help="workloads only: stream changes")

    d = sub.add_parser("describe", help="show one object in detail (workloads: conditions, admission, why pending)")
    d.add_argument("kind")
    d.add_argument("name")
    nsopt(d)

    de = sub.add_parser("delete", help="delete objects")
    de.add_argument("kind", nargs="?")
    de.add_argument("names", nargs="*")
    de.add_argument("-f", "--filename", action="append", default=[])
    nsopt(de)

    for verb, help_ in (("stop", "deactivate a workload, or stop a queue (stopPolicy)"), ("resume", "undo stop")):
        s = sub.add_parser(verb, help=help_)
        s.add_argument("kind")
        s.add_argument("name")
        nsopt(s)
        if verb == "stop":
            s.add_argument("--keep-already-running", action="store_true", help="queues: Hold instead of HoldAndDrain")

    r = sub.add_parser("run", help="submit a one-podSet workload running CMD")
    r.add_argument("--queue", "-q", required=True, help="LocalQueue name")
    nsopt(r)
    r.add_argument("--name")
    r.add_argument("--cpu", default="1")
    r.add_argument("--memory", default="")
    r.add_argument("--limit-cpu", default="")
    r.add_argument("--limit-memory", default="")
    r.add_argument("--request", action="append", help="extra RESOURCE=QUANTITY")
    r.add_argument("--count", type=int, default=1)
    r.add_argument("--min-count", type=int, default=0)
    r.add_argument("--priority-class", default="")
    r.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]")

    lg = sub.add_parser("logs", help="print a workload's pod logs (through the controller)")
    lg.add_argument("workload")
    nsopt(lg)
    lg.add_argument("--pod", help="pod name or index (default: every pod)")
    lg.add_argument("-c", "--container")
    lg.add_argument("-f", "--follow", action="store_true")
    lg.add_argument("--prefix", action="store_true", help="prefix each line with [pod/container]")

    tk = sub.add_parser("token", help="bootstrap tokens for joining nodes (cluster-admin)")
    tk.add_argument("action", choices=["create", "list", "delete"])
    tk.add_argument("id", nargs="*", help="delete: token IDs")
    tk.add_argument("--ttl", default="", help="create: lifetime, e.g. 1h (default 1h, at most 30d)")
    tk.add_argument("--uses", type=int, default=0, help="create: how many joins it allows (default 1)")
    tk.add_argument("--description", default="")
    tk.add_argument("--print-join-command", action="store_true", help="create: print the whole join command")
    tk.add_argument("--join-address", default="", help="create: the token port address for the join command")

    au = sub.add_parser("auth", help="who the controller thinks you are")
    au.add_argument("action", choices=["whoami"])

    ce = sub.add_parser("certs", help="issue user credentials, revoke certificates (cluster-admin)")
    ce.add_argument("action", choices=["issue", "revoke"])
    ce.add_argument("serial", nargs="*", help="revoke: hexadecimal serials")
    ce.add_argument("--user")
    ce.add_argument("--group", action="append", default=[])
    ce.add_argument("--ttl", default="", help="issue: lifetime, e.g. 2160h (default 365 days)")
    ce.add_argument("--out", help="issue: write the user's client config here")
    ce.add_argument("--for-server", default="", help="issue: server address written into the config")

    sm = sub.add_parser("simulate", help="run one scheduling cycle over YAML files, no server needed")
    sm.add_argument("-f", "--filename", action="append", default=[])
    return p


async def _dispatch(ns: argparse.Namespace) -> int:
    config = clientconfig.load(ns.config)
    ns.server = ns.server or default_server(config)
    async with Client(ns.server, timeout=ns.timeout, config=config) as c:
        cmd = ns.command
        if cmd == "apply":
            return await cmd_apply(c, ns)
        if cmd == "create":
            return await cmd_create(c, ns)
        if cmd == "get":
            return await cmd_get(c, ns)
        if cmd == "describe":
            return await cmd_describe(c, ns)
        if cmd == "delete":
            return await cmd_delete(c, ns)
        if cmd in ("stop", "resume"):
            return await cmd_stop_resume(c, ns, active=cmd == "resume")
        if cmd == "logs":
            return await cmd_logs(c, ns)
        if cmd == "token":
            return await cmd_token(c, ns)
        if cmd == "auth":
            return await cmd_auth(c, ns)
        if cmd == "certs":
            return await cmd_certs(c, ns)
        if cmd == "run":
            if ns.argv and ns.argv[0] == "--":
                ns.argv = ns.argv[1:]
            return await cmd_run(c, ns)
    raise UsageError(f"unknown command {ns.command}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        if ns.command == "simulate":
            return cmd_simulate(ns)
        return asyncio.run(_dispatch(ns))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ManifestError as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return 1
    except clientconfig.ConfigError as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except ClientError as exc:
        if exc.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) and "store" not in exc.message:
            print(f"error: cannot reach the controller at {ns.server}: {_one_line(exc.message)}", file=sys.stderr)
            return 3
        print(f"error: {_one_line(exc.message)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the CLI's last resort: one line, never a traceback
        from sluicegate.controller.errors import ControllerError

        if isinstance(exc, ControllerError):
            print(f"error: {_one_line(str(exc))}", file=sys.stderr)
            return 1
        print(f"error: {type(exc).__name__}: {_one_line(str(exc))}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
