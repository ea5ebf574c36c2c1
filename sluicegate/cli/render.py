"""What sluicectl prints: tables (plain and ``wide``), json, yaml, name, jsonpath, ``describe``, ``top``.

Pure formatting of the plain dicts the client returns; nothing here talks to the server.
"""

from __future__ import annotations

import json
import shlex
import time
from typing import Any

import yaml

from sluicegate.cli import jsonpath
from sluicegate.manifest.timefmt import parse_rfc3339
from sluicegate.quantity import format_canonical, parse_canonical

# -o values besides jsonpath=TEMPLATE.
OUTPUTS = ("table", "wide", "json", "yaml", "name")
WORKLOAD_KINDS = ("workload", "workloads", "wl")
NODE_KINDS = ("node", "nodes", "no")


class OutputError(ValueError):
    pass


def check_output(value: str) -> str:
    """An -o value as given; OutputError naming the accepted ones."""
    if value in OUTPUTS or value.startswith("jsonpath="):
        if value.startswith("jsonpath="):
            try:
                jsonpath.parse(value[len("jsonpath="):])
            except jsonpath.TemplateError as exc:
                raise OutputError(f"-o jsonpath: {exc}") from None
        return value
    raise OutputError(f"unknown output format {value!r}: expected one of wide, json, yaml, name, jsonpath=TEMPLATE")


def age(meta: dict[str, Any], now: float | None = None) -> str:
    ts = meta.get("creationTimestamp")
    if not ts:
        return "-"
    secs = max(0, int((time.time() if now is None else now) - parse_rfc3339(ts)))
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= n:
            return f"{secs // n}{unit}"
    return f"{secs}s"


def cond(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for c in obj.get("status", {}).get("conditions", []) or []:
        if c.get("type") == type_:
            return dict(c)
    return None


def is_true(obj: dict[str, Any], type_: str) -> bool:
    c = cond(obj, type_)
    return c is not None and c.get("status") == "True"


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]
    lines = ["   ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)


# ------------------------------------------------------------------ workloads

WORKLOAD_HEADERS = ["NAMESPACE", "NAME", "QUEUE", "RESERVED IN", "STATE", "PRIORITY", "AGE"]
WIDE_WORKLOAD_HEADERS = [*WORKLOAD_HEADERS, "PODS", "NODES", "REASON"]
# `get workloads -w`: columns keep these widths whatever arrives later (a longer value widens only its own line).
WATCH_WIDTHS = [9, 16, 32, 16, 16, 13, 8, 6]


def workload_state(o: dict[str, Any]) -> str:
    finished = cond(o, "Finished")
    if finished and finished.get("status") == "True":
        return "Finished"
    if o.get("spec", {}).get("active") is False:
        return "Inactive"
    if is_true(o, "Admitted"):
        return "Admitted"
    return "QuotaReserved" if is_true(o, "QuotaReserved") else "Pending"


def workload_row(o: dict[str, Any], *, wide: bool = False) -> list[str]:
    meta, spec, st = o["metadata"], o.get("spec", {}), o.get("status", {})
    adm = st.get("admission") or {}
    row = [
        meta.get("namespace", ""),
        meta["name"],
        spec.get("queueName", ""),
        adm.get("clusterQueue", ""),
        workload_state(o),
        str(spec.get("priority", 0)),
        age(meta),
    ]
    if wide:
        pods = (st.get("extra") or {}).get("pods") or []
        qr = cond(o, "QuotaReserved")
        why = qr.get("reason", "") if qr and qr.get("status") == "False" else ""
        row += [str(len(pods)), ",".join(sorted({p.get("node", "") for p in pods})) or "<none>", why or "-"]
    return row


def watch_header() -> str:
    return _fixed(["EVENT", *WORKLOAD_HEADERS])


def watch_row(event: str, o: dict[str, Any]) -> str:
    return _fixed([event, *workload_row(o)])


def _fixed(cells: list[str]) -> str:
    return "   ".join(c.ljust(w) for c, w in zip(cells, WATCH_WIDTHS, strict=True)).rstrip()


def render_table(kind: str, objs: list[dict[str, Any]], *, wide: bool = False) -> str:
    k = kind.lower()
    if k in WORKLOAD_KINDS:
        return table(WIDE_WORKLOAD_HEADERS if wide else WORKLOAD_HEADERS, [workload_row(o, wide=wide) for o in objs])
    if k in ("clusterqueue", "clusterqueues", "cq"):
        rows = []
        for o in objs:
            spec, st = o.get("spec", {}), o.get("status", {})
            row = [
                o["metadata"]["name"],
                spec.get("cohortName", ""),
                spec.get("queueingStrategy", "BestEffortFIFO"),
                str(st.get("pendingWorkloads", 0)),
                str(st.get("reservingWorkloads", 0)),
                str(st.get("admittedWorkloads", 0)),
                "True" if is_true(o, "Active") else "False",
            ]
            if wide:
                share = (st.get("fairSharing") or {}).get("weightedShare")
                row += [str(spec.get("stopPolicy", "None")), "-" if share is None else f"{share:g}"]
            rows.append(row)
        headers = ["NAME", "COHORT", "STRATEGY", "PENDING", "RESERVING", "ADMITTED", "ACTIVE"]
        return table(headers + (["STOP POLICY", "WEIGHTED SHARE"] if wide else []), rows)
    if k in ("localqueue", "localqueues", "lq", "queue", "queues"):
        rows = [
            [
                o["metadata"].get("namespace", ""),
                o["metadata"]["name"],
                o.get("spec", {}).get("clusterQueue", ""),
                str(o.get("status", {}).get("pendingWorkloads", 0)),
                str(o.get("status", {}).get("admittedWorkloads", 0)),
            ]
            + ([str(o.get("spec", {}).get("stopPolicy", "None"))] if wide else [])
            for o in objs
        ]
        return table(["NAMESPACE", "NAME", "CLUSTERQUEUE", "PENDING", "ADMITTED"] + (["STOP POLICY"] if wide else []),
                     rows)
    if k in ("resourceflavor", "resourceflavors", "flavor", "flavors", "rf"):
        rows = [
            [
                o["metadata"]["name"],
                ",".join(f"{a}={b}" for a, b in sorted((o.get("spec", {}).get("nodeLabels") or {}).items()))
                or "<none>",
            ]
            + ([",".join(taint_text(t) for t in o.get("spec", {}).get("nodeTaints") or []) or "<none>",
                o.get("spec", {}).get("topologyName") or "<none>"] if wide else [])
            for o in objs
        ]
        return table(["NAME", "NODE LABELS"] + (["NODE TAINTS", "TOPOLOGY"] if wide else []), rows)
    if k in POD_GROUP_KINDS:
        # kube-batch's and Volcano's printer columns, with the three counts kube-batch keeps.
        rows = [
            [
                o["metadata"].get("namespace", ""),
                o["metadata"]["name"],
                str(o.get("status", {}).get("phase", "")),
                str(o.get("spec", {}).get("minMember", 1)),
                str(o.get("status", {}).get("running", 0)),
                str(o.get("status", {}).get("succeeded", 0)),
                str(o.get("status", {}).get("failed", 0)),
                str(o.get("spec", {}).get("queue", "")),
            ]
            + ([str(o.get("status", {}).get("workload", "")), str(o.get("status", {}).get("message", ""))]
               if wide else [])
            for o in objs
        ]
        headers = ["NAMESPACE", "NAME", "PHASE", "MINMEMBER", "RUNNING", "SUCCEEDED", "FAILED", "QUEUE"]
        return table(headers + (["WORKLOAD", "MESSAGE"] if wide else []), rows)
    if k in ("cohort", "cohorts"):
        rows = [[o["metadata"]["name"], o.get("spec", {}).get("parentName", "")] for o in objs]
        return table(["NAME", "PARENT"], rows)
    if k in ("topology", "topologies"):
        rows = [[o["metadata"]["name"],
                 " > ".join(str(lv.get("nodeLabel", "")) for lv in o.get("spec", {}).get("levels") or [])]
                for o in objs]
        return table(["NAME", "LEVELS"], rows)
    rows = [[o["metadata"].get("namespace", ""), o["metadata"]["name"]] for o in objs]
    return table(["NAMESPACE", "NAME"], rows)


def render(kind: str, objs: list[dict[str, Any]], output: str, single: bool) -> str:
    """Objects in an -o format; ``single``: one object asked for by name (no list around it)."""
    data: Any = objs[0] if single else {"apiVersion": "v1", "kind": "List", "items": objs}
    if output == "json":
        return json.dumps(data, indent=2)
    if output == "yaml":
        return yaml.safe_dump(data, sort_keys=False).rstrip()
    if output.startswith("jsonpath="):
        return jsonpath.render(output[len("jsonpath="):], data)
    if output == "name":
        # kubectl's kind/name, the kind singular whatever the user typed.
        return "\n".join(f"{str(o.get('kind') or kind).lower()}/{o['metadata']['name']}" for o in objs)
    return render_table(kind, objs, wide=output == "wide")


# -------------------------------------------------------------------- pending

PENDING_HEADERS = ["NAMESPACE", "NAME", "LOCALQUEUE", "CLUSTERQUEUE", "PRIORITY", "POSITION IN CQ", "POSITION IN LQ",
                   "AGE"]


def render_pending(items: list[dict[str, Any]], output: str) -> str:
    if output not in ("table", "wide"):
        return render("pendingworkload", items, output, False)
    rows = []
    for p in items:
        row = [p["metadata"]["namespace"], p["metadata"]["name"], p["localQueueName"], p["clusterQueueName"],
               str(p["priority"]), str(p["positionInClusterQueue"]), str(p["positionInLocalQueue"]), age(p["metadata"])]
        if output == "wide":
            row.append(f"{p['reason']}: {p['message']}" if p["reason"] else "-")
        rows.append(row)
    return table(PENDING_HEADERS + (["WAITING BECAUSE"] if output == "wide" else []), rows)


def position_line(pos: dict[str, Any]) -> str:
    meta = pos["metadata"]
    return (f"Position:      {pos['positionInClusterQueue']} in ClusterQueue {pos['clusterQueueName']}, "
            f"{pos['positionInLocalQueue']} in LocalQueue {meta['namespace']}/{pos['localQueueName']} (0 is next)")


# ---------------------------------------------------------------------- nodes


def fmt_res(resource: str, amount: int) -> str:
    return format_canonical(resource, amount)


def render_nodes(nodes: list[dict[str, Any]], output: str) -> str:
    if output in ("json", "yaml") or output.startswith("jsonpath="):
        return render("node", nodes, output, False)
    if output == "name":
        return "\n".join(f"node/{n['name']}" for n in nodes)
    rows = []
    for n in nodes:
        alloc, req, use = n["allocatable"], n["requested"], n["usage"]
        status = "Ready" if n["ready"] else "NotReady"
        if use["conditions"]:
            status += "," + ",".join(use["conditions"])
        row = [
            n["name"],
            status,
            f"{fmt_res('cpu', req.get('cpu', 0))}/{fmt_res('cpu', alloc.get('cpu', 0))}",
            f"{fmt_res('memory', req.get('memory', 0))}/{fmt_res('memory', alloc.get('memory', 0))}",
            f"{use['cpuUsageCores']:.2f}",
            f"{use['memoryAvailable'] / 2**30:.1f}Gi" if use["memoryAvailable"] else "-",
            str(n["pods"]),
        ]
        if output == "wide":
            row += [n.get("agentVersion", "") or "-",
                    ",".join(f"{k}={v}" for k, v in sorted(n.get("labels", {}).items())) or "<none>",
                    ",".join(taint_text(t) for t in n.get("taints", [])) or "<none>"]
        rows.append(row)
    headers = ["NAME", "STATUS", "CPU REQ/ALLOC", "MEMORY REQ/ALLOC", "CPU USED", "MEM AVAILABLE", "PODS"]
    return table(headers + (["AGENT", "LABELS", "TAINTS"] if output == "wide" else []), rows)


def taint_text(t: dict[str, Any]) -> str:
    """kubectl's form of a taint: key=value:Effect."""
    value = t.get("value", "")
    return f"{t['key']}={value}:{t['effect']}" if value else f"{t['key']}:{t['effect']}"


# ------------------------------------------------------------------- describe


POD_GROUP_KINDS = ("podgroup", "podgroups", "pg")


def describe_pod_group(o: dict[str, Any]) -> str:
    """A PodGroup as kube-batch reports it: the gang, then the phase and its pods by state."""
    meta, spec, st = o["metadata"], o.get("spec", {}), o.get("status", {})
    lines = [
        f"Name:              {meta['name']}",
        f"Namespace:         {meta.get('namespace', '')}",
        f"API:               {o.get('apiVersion', '')}",
        f"MinMember:         {spec.get('minMember', 1)}",
        f"Queue:             {spec.get('queue', '')} (LocalQueue)",
    ]
    if spec.get("priorityClassName"):
        lines.append(f"PriorityClass:     {spec['priorityClassName']}")
    if spec.get("minResources"):
        lines.append("MinResources:      " + ", ".join(f"{k}={v}" for k, v in sorted(spec["minResources"].items())))
    lines += [
        f"Phase:             {st.get('phase', '')}",
        f"Running:           {st.get('running', 0)}",
        f"Succeeded:         {st.get('succeeded', 0)}",
        f"Failed:            {st.get('failed', 0)}",
        f"Workload:          {st.get('workload') or '<none>'}",
    ]
    if st.get("message"):
        lines.append(f"Message:           {st['message']}")
    return "\n".join(lines)


def topology_request_text(tr: dict[str, Any]) -> str:
    parts = [f"{k}={tr[k]}" for k in ("required", "preferred", "unconstrained", "podSetSliceRequiredTopology",
                                      "podSetSliceSize") if k in tr]
    return " ".join(parts)


def topology_assignment_text(ta: dict[str, Any]) -> str:
    """``levels: value/value=count, ...`` from Kueue v1beta2's compact slices (or v1beta1's domains)."""
    levels = [str(lv) for lv in ta.get("levels") or []]
    domains: list[tuple[list[str], int]] = [([str(v) for v in d.get("values") or []], int(d.get("count", 0)))
                                            for d in ta.get("domains") or []]
    for sl in ta.get("slices") or []:
        n = int(sl.get("domainCount", 0))
        columns: list[list[str]] = []
        for lv in sl.get("valuesPerLevel") or []:
            if "universal" in lv:
                columns.append([str(lv["universal"])] * n)
            else:
                ind = lv.get("individual") or {}
                columns.append([f"{ind.get('prefix', '')}{r}{ind.get('suffix', '')}" for r in ind.get("roots") or []])
        pc = sl.get("podCounts") or {}
        counts = [int(pc["universal"])] * n if "universal" in pc else [int(c) for c in pc.get("individual") or []]
        for i in range(min(n, len(counts))):
            domains.append(([col[i] for col in columns if i < len(col)], counts[i]))
    shown = ", ".join(f"{'/'.join(v)}={c}" for v, c in domains)
    return f"{'/'.join(levels)}: {shown}"


def describe_workload(o: dict[str, Any], position: dict[str, Any] | None = None) -> str:
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
            + (f" topology[{topology_request_text(ps['topologyRequest'])}]" if ps.get("topologyRequest") else "")
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
            if psa.get("topologyAssignment"):
                out.append(f"    topology: {topology_assignment_text(psa['topologyAssignment'])}")
        reserved_msg = (cond(o, "QuotaReserved") or {}).get("message", "")
        if "backfilled: " in reserved_msg:
            # A Backfill queue admitted it ahead of a blocked head's reservation: why that was safe.
            out.append(f"Backfilled:    {reserved_msg.split('backfilled: ', 1)[1]}")
    else:
        qr = cond(o, "QuotaReserved")
        out.append("Admission:     <none>")
        if position is not None:
            out.append(position_line(position))
        if qr and qr.get("status") == "False":
            out.append(f"Pending:       {qr.get('reason', '')}: {qr.get('message', '')}")
            msg = qr.get("message", "")
            if "reserved: expected to start at " in msg:
                # The head of a Backfill queue: when its reservation says it will start.
                start = msg.split("reserved: expected to start at ", 1)[1].split(",", 1)[0]
                out.append(f"Expected start: {start} (reservation, from running workloads' time limits)")
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


# ------------------------------------------------------------------------ top


def _percent(used: int, total: int) -> str:
    return f"{100 * used / total:.0f}%" if total else "-"


def render_top(cluster_queues: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> str:
    """Queues (pending, admitted, reserved against nominal quota per flavor and resource) and nodes."""
    rows = []
    for o in cluster_queues:
        name, spec, st = o["metadata"]["name"], o.get("spec", {}), o.get("status", {})
        reserved = {(f["name"], r["name"]): r["total"] for f in st.get("flavorsReservation", []) or []
                    for r in f.get("resources", [])}
        first = True
        for rg in spec.get("resourceGroups", []) or []:
            for fq in rg.get("flavors", []) or []:
                for rq in fq.get("resources", []) or []:
                    res = rq["name"]
                    nominal = parse_canonical(res, str(rq.get("nominalQuota", "0")))
                    used = parse_canonical(res, str(reserved.get((fq["name"], res), "0")))
                    rows.append([
                        name if first else "",
                        str(st.get("pendingWorkloads", 0)) if first else "",
                        str(st.get("admittedWorkloads", 0)) if first else "",
                        fq["name"], res, f"{fmt_res(res, used)}/{fmt_res(res, nominal)}", _percent(used, nominal),
                    ])
                    first = False
        if first:
            rows.append([name, str(st.get("pendingWorkloads", 0)), str(st.get("admittedWorkloads", 0)),
                         "-", "-", "-", "-"])
    queues = table(["CLUSTERQUEUE", "PENDING", "ADMITTED", "FLAVOR", "RESOURCE", "RESERVED/NOMINAL", "USE"], rows)
    node_rows = []
    for n in nodes:
        alloc, req, use = n["allocatable"], n["requested"], n["usage"]
        cpu_alloc, mem_alloc = alloc.get("cpu", 0), alloc.get("memory", 0)
        mem_used = use["memoryTotal"] - use["memoryAvailable"] if use["memoryTotal"] else 0
        node_rows.append([
            n["name"], "Ready" if n["ready"] else "NotReady",
            f"{fmt_res('cpu', req.get('cpu', 0))}/{fmt_res('cpu', cpu_alloc)}",
            f"{use['cpuUsageCores']:.2f}",
            f"{fmt_res('memory', req.get('memory', 0))}/{fmt_res('memory', mem_alloc)}",
            f"{mem_used / 2**30:.1f}Gi" if use["memoryTotal"] else "-",
            str(n["pods"]),
        ])
    nodes_text = table(["NODE", "STATUS", "CPU REQ/ALLOC", "CPU USED", "MEMORY REQ/ALLOC", "MEMORY USED", "PODS"],
                       node_rows)
    return f"{queues}\n\n{nodes_text}"
