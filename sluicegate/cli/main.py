"""sluicectl: apply manifests, submit and inspect workloads, simulate a cycle.

Every failure ends with a one-line ``error: ...`` on stderr and a non-zero
exit code (1 for a refused request, 2 for bad usage, 3 for an unreachable
controller).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import sys
import time
from collections.abc import Sequence
from typing import Any, NoReturn

import argcomplete
import grpc
import yaml
from argcomplete.shell_integration import shellcode

from sluicegate import clientconfig
from sluicegate.cli import jsonpath
from sluicegate.cli.render import (
    NODE_KINDS,
    POD_GROUP_KINDS,
    WORKLOAD_KINDS,
    OutputError,
    check_output,
    describe_pod_group,
    describe_workload,
    render,
    render_nodes,
    render_pending,
    render_top,
    table,
    watch_header,
    watch_row,
)
from sluicegate.client import Client, ClientError, Document, default_server
from sluicegate.manifest.decode_job import is_job
from sluicegate.manifest.errors import ManifestError
from sluicegate.manifest.loader import RawDocument, load_documents
from sluicegate.manifest.selectors import SelectorError, parse_selector
from sluicegate.manifest.timefmt import parse_duration


class UsageError(Exception):
    pass


def _one_line(text: str) -> str:
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


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
    # Workloads and batch/v1 Jobs are created one by one (idempotent by name,
    # or named from metadata.generateName); other kinds are applied together.
    creates = [d for d in docs if d.body.get("kind") == "Workload" or is_job(d.body)]
    others = [d for d in docs if not (d.body.get("kind") == "Workload" or is_job(d.body))]
    if others:
        planned = await c.apply(_to_client_docs(others), dry_run=True)
        exists = [f"{k}/{n}" for k, _, n, a in planned if a != "created"]
        if exists:
            raise UsageError(f"already exists: {', '.join(exists)} (use apply to update)")
        await c.apply(_to_client_docs(others))
        for k, namespace, n, _ in planned:
            print(f"{k.lower()}/{namespace + '/' if namespace else ''}{n} created")
    for d in creates:
        wl, created = await c.create_workload(Document(body=json.dumps(d.body), source=d.source))
        m = wl["metadata"]
        print(f"workload/{m['namespace']}/{m['name']} {'created' if created else 'unchanged (already exists)'}")
    return 0


def _namespace(ns: argparse.Namespace) -> str:
    return getattr(ns, "namespace", None) or "default"


async def cmd_get(c: Client, ns: argparse.Namespace) -> int:
    kind, output = ns.kind, ns.output
    all_ns = getattr(ns, "all_namespaces", False)
    namespace = "" if all_ns else _namespace(ns)
    k = kind.lower()
    if k in ("pending", "pendingworkloads", "pendingworkload"):
        return await cmd_get_pending(c, ns)
    if k in NODE_KINDS:
        nodes = await c.list_nodes()
        if ns.name:
            nodes = [n for n in nodes if n["name"] == ns.name]
            if not nodes:
                raise UsageError(f"node {ns.name} not found")
        print(render_nodes(nodes, output))
        return 0
    if ns.watch:
        if k not in WORKLOAD_KINDS:
            raise UsageError("--watch is supported for workloads")
        selector = parse_selector(ns.selector or "")
        rows = output in ("table", "wide")  # a stream keeps one header and fixed columns
        if rows:
            print(watch_header(), flush=True)
        async for etype, wl in c.watch_workloads(namespace=namespace, name=ns.name or ""):
            if not selector.matches(wl["metadata"].get("labels") or {}):
                continue
            if rows:
                print(watch_row(etype, wl), flush=True)
            else:
                print(render("workload", [wl], output, True), flush=True)
        return 0
    if ns.name:
        if all_ns:
            raise UsageError("a resource cannot be retrieved by name across all namespaces")
        obj = await c.get(kind, ns.name, namespace)
        print(render(kind, [obj], output, True))
        return 0
    if k in WORKLOAD_KINDS:
        objs = await c.list_workloads(namespace=namespace, label_selector=ns.selector or "", state=ns.state or "")
    else:
        objs = await c.list(kind, namespace, ns.selector or "")
    if not objs and output in ("table", "wide"):
        where = "" if all_ns or not namespace else f" in {namespace} namespace"
        print(f"No resources found{where}.", file=sys.stderr)
        return 0
    print(render(kind, objs, output, False))
    return 0


async def cmd_get_pending(c: Client, ns: argparse.Namespace) -> int:
    if ns.name:
        raise UsageError("get pending takes no NAME: use --cluster-queue CQ or --queue LQ")
    if bool(ns.cluster_queue) == bool(ns.queue):
        raise UsageError("get pending needs exactly one of --cluster-queue CQ or --queue LQ (with -n NAMESPACE)")
    items = await c.pending(cluster_queue=ns.cluster_queue or "", local_queue=ns.queue or "",
                            namespace=_namespace(ns) if ns.queue else "", offset=ns.offset, limit=ns.limit)
    if not items and ns.output in ("table", "wide"):
        print("No pending workloads.", file=sys.stderr)
        return 0
    print(render_pending(items, ns.output))
    return 0


async def _pods_of(c: Client, workload: str, namespace: str) -> list[str]:
    wl = await c.get_workload(workload, namespace)
    pods = (wl.get("status", {}).get("extra") or {}).get("pods") or []
    return [str(p["name"]) for p in pods]


async def cmd_logs(c: Client, ns: argparse.Namespace) -> int:
    namespace = _namespace(ns)
    pods: list[str] = []
    if ns.follow and not ns.pod:
        try:
            pods = await _pods_of(c, ns.workload, namespace)
        except ClientError:
            pass  # the Logs call below reports what is wrong, under its own verb
    if len(pods) > 1:
        # kubectl's --prefix for several pods: one stream per pod, lines
        # interleaved as they come, each prefixed, until every pod's ends.
        await follow_pods(c, ns.workload, namespace, pods, container=ns.container or "")
        return 0
    prefix = ns.prefix
    async for pod, container, data in c.logs(
        ns.workload, namespace=namespace, pod=ns.pod or "", container=ns.container or "", follow=ns.follow
    ):
        if prefix:
            text = data.decode("utf-8", errors="replace")
            for line in text.splitlines(keepends=True):
                sys.stdout.write(f"[{pod}/{container}] {line}")
        else:
            sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


async def follow_pods(c: Client, workload: str, namespace: str, pods: Sequence[str], *, container: str) -> None:
    """Follow every pod at once; each complete line goes out whole, prefixed ``[pod]``."""

    async def one(pod: str) -> None:
        partial = ""
        async for _, _, data in c.logs(workload, namespace=namespace, pod=pod, container=container, follow=True):
            text = partial + data.decode("utf-8", errors="replace")
            *lines, partial = text.split("\n")
            for line in lines:
                sys.stdout.write(f"[{pod}] {line}\n")
            sys.stdout.flush()
        if partial:
            sys.stdout.write(f"[{pod}] {partial}\n")
            sys.stdout.flush()

    async with asyncio.TaskGroup() as tg:
        for pod in pods:
            tg.create_task(one(pod), name=f"sluicectl-logs-{pod}")


async def cmd_describe(c: Client, ns: argparse.Namespace) -> int:
    namespace = _namespace(ns)
    if ns.kind.lower() in WORKLOAD_KINDS:
        wl = await c.get_workload(ns.name, namespace)
        position = None if wl.get("status", {}).get("admission") else await c.position(ns.name, namespace)
        print(describe_workload(wl, position))
        return 0
    if ns.kind.lower() in NODE_KINDS:
        nodes = [n for n in await c.list_nodes() if n["name"] == ns.name]
        if not nodes:
            raise UsageError(f"node {ns.name!r} not found")
        print(yaml.safe_dump(nodes[0], sort_keys=False).rstrip())
        return 0
    obj = await c.get(ns.kind, ns.name, namespace)
    if ns.kind.lower() in POD_GROUP_KINDS:
        print(describe_pod_group(obj))
        return 0
    print(yaml.safe_dump(obj, sort_keys=False).rstrip())
    return 0


async def cmd_top(c: Client, ns: argparse.Namespace) -> int:
    """Queues and nodes every --interval seconds (once with --once); clears the screen only on a terminal."""
    clear = sys.stdout.isatty() and not ns.once
    for _ in range(ns.iterations if ns.iterations > 0 else sys.maxsize):
        cqs = await c.list("ClusterQueue")
        nodes = await c.list_nodes()
        text = render_top(cqs, nodes)
        if clear:
            sys.stdout.write("\x1b[H\x1b[2J")
            text = f"every {ns.interval:g}s — {time.strftime('%H:%M:%S')}\n\n{text}"
        print(text, flush=True)
        if ns.once:
            break
        await asyncio.sleep(ns.interval)
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
        await c.delete(ns.kind, name, _namespace(ns))
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
        print(table(["ID", "EXPIRES", "USES-LEFT", "CREATED-BY", "DESCRIPTION"], rows))
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
        await c.set_active(ns.name, active, _namespace(ns))
    elif k in ("clusterqueue", "cq", "localqueue", "lq"):
        policy = None if active else ("Hold" if ns.keep_already_running else "HoldAndDrain")
        await _set_stop(
            c, "ClusterQueue" if k in ("clusterqueue", "cq") else "LocalQueue", ns.name, _namespace(ns), policy
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
        "metadata": {"name": name, "namespace": _namespace(ns)},
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


KINDS = ("workloads", "clusterqueues", "localqueues", "resourceflavors", "cohorts", "workloadpriorityclasses",
         "priorityclasses", "namespaces", "podgroups", "topologies", "nodes", "pending")


class _Parser(argparse.ArgumentParser):
    """argparse with kubectl's habits: options anywhere among the arguments, one-line usage errors.

    A verb's options may come before, between or after its arguments
    (``get workloads -o yaml NAME``) because each verb parses "intermixed";
    a usage error raises UsageError, which main() prints as one ``error:`` line.
    """

    _intermixing = False

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        intermixable = not any(a.nargs in (argparse.PARSER, argparse.REMAINDER) for a in self._actions)
        if intermixable and not self._intermixing:
            self._intermixing = True
            try:
                return super().parse_known_intermixed_args(args, namespace)
            finally:
                self._intermixing = False
        return super().parse_known_args(args, namespace)


def _complete_kinds(prefix: str, **_: object) -> list[str]:
    return [k for k in KINDS if k.startswith(prefix)]


def _complete_names(prefix: str, parsed_args: argparse.Namespace, **_: object) -> list[str]:
    """Names of the kind already typed, asked of the server (nothing when it cannot be reached quickly)."""
    kind = str(getattr(parsed_args, "kind", "") or "")
    if not kind or kind.lower() in ("pending",):
        return []

    async def names() -> list[str]:
        config = clientconfig.load(getattr(parsed_args, "config", None))
        server = getattr(parsed_args, "server", None) or default_server(config)
        async with Client(server, timeout=2.0, config=config) as c:
            if kind.lower() in NODE_KINDS:
                return [n["name"] for n in await c.list_nodes()]
            namespace = "" if getattr(parsed_args, "all_namespaces", False) else _namespace(parsed_args)
            if kind.lower() in WORKLOAD_KINDS:
                objs = await c.list_workloads(namespace=namespace)
            else:
                objs = await c.list(kind, namespace)
            return [str(o["metadata"]["name"]) for o in objs]

    try:
        return [n for n in asyncio.run(names()) if n.startswith(prefix)]
    except Exception:  # completion must never break the shell: no names is the answer
        return []


def _output(value: str) -> str:
    try:
        return check_output(value)
    except OutputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _version() -> str:
    try:
        return importlib.metadata.version("sluicegate")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="sluicectl", description="Talk to a sluicegate controller (kubectl's habits; see docs/cli.md).")
    p.add_argument("--version", action="version", version=f"sluicectl {_version()}")

    def connection(parser: argparse.ArgumentParser, default: object) -> None:
        # On the top parser and on every verb, so they may come anywhere; a
        # verb's copy defaults to SUPPRESS so it never hides the top one's value.
        parser.add_argument(
            "--server", default=default,
            help="controller gRPC address, or several comma-separated (controllers sharing a store: the leader is "
                 "found and followed; default: $SLUICEGATE_SERVER, the config's servers, 127.0.0.1:7420)")
        parser.add_argument("--config", default=default,
                            help="client config file (default: $SLUICEGATE_CONFIG, ~/.config/sluicegate/config)")
        parser.add_argument("--timeout", type=float, default=default if default is argparse.SUPPRESS else 30.0,
                            help="seconds to wait for each request (default 30)")
        parser.add_argument("-n", "--namespace", default=default, help="namespace (default: default)")
        parser.add_argument("-A", "--all-namespaces", action="store_true",
                            default=default if default is argparse.SUPPRESS else False,
                            help="every namespace (get, top)")

    connection(p, None)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    def verb(name: str, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        connection(sp, argparse.SUPPRESS)
        return sp

    def output(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("-o", "--output", type=_output, default="table", metavar="FORMAT",
                        help="wide, json, yaml, name or jsonpath=TEMPLATE (default: a table)")

    a = verb("apply", "create or update objects from YAML/JSON files or directories")
    a.add_argument("-f", "--filename", action="append", default=[])
    a.add_argument("--dry-run", action="store_true")

    cr = verb("create", "create objects; workloads are idempotent by name, metadata.generateName draws one")
    cr.add_argument("-f", "--filename", action="append", default=[])

    g = verb("get", "list or show objects; 'get pending' lists a queue's pending workloads in order")
    g.add_argument("kind", help=f"one of: {', '.join(KINDS)}").completer = _complete_kinds  # type: ignore[attr-defined]
    g.add_argument("name", nargs="?").completer = _complete_names  # type: ignore[attr-defined]
    output(g)
    g.add_argument("-l", "--selector", help="label selector: a=b,c!=d,e in (x,y),f notin (z),g,!h")
    g.add_argument("--state", help="workloads only: Pending|QuotaReserved|Admitted|Finished|Inactive")
    g.add_argument("-w", "--watch", action="store_true", help="workloads only: stream changes")
    g.add_argument("--cluster-queue", help="pending: the ClusterQueue")
    g.add_argument("-q", "--queue", help="pending: the LocalQueue (in -n NAMESPACE)")
    g.add_argument("--offset", type=int, default=0, help="pending: first position listed (0-based)")
    g.add_argument("--limit", type=int, default=0, help="pending: at most this many (default 1000)")

    d = verb("describe", "show one object in detail (workloads: conditions, admission, position, why pending)")
    d.add_argument("kind").completer = _complete_kinds  # type: ignore[attr-defined]
    d.add_argument("name").completer = _complete_names  # type: ignore[attr-defined]

    de = verb("delete", "delete objects")
    de.add_argument("kind", nargs="?").completer = _complete_kinds  # type: ignore[attr-defined]
    de.add_argument("names", nargs="*").completer = _complete_names  # type: ignore[attr-defined]
    de.add_argument("-f", "--filename", action="append", default=[])

    for name, help_ in (("stop", "deactivate a workload, or stop a queue (stopPolicy)"), ("resume", "undo stop")):
        s = verb(name, help_)
        s.add_argument("kind").completer = _complete_kinds  # type: ignore[attr-defined]
        s.add_argument("name").completer = _complete_names  # type: ignore[attr-defined]
        if name == "stop":
            s.add_argument("--keep-already-running", action="store_true", help="queues: Hold instead of HoldAndDrain")

    r = verb("run", "submit a one-podSet workload running CMD")
    r.add_argument("--queue", "-q", required=True, help="LocalQueue name")
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

    lg = verb("logs", "print a workload's pod logs (through the controller)")
    lg.add_argument("workload")
    lg.add_argument("--pod", help="pod name or index (default: every pod)")
    lg.add_argument("-c", "--container")
    lg.add_argument("-f", "--follow", action="store_true",
                    help="follow; several pods are followed at once, each line prefixed [pod]")
    lg.add_argument("--prefix", action="store_true", help="prefix each line with [pod/container]")

    tp = verb("top", "queues (pending, admitted, reserved against nominal quota) and nodes, refreshed")
    tp.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes (default 2)")
    tp.add_argument("--once", action="store_true", help="print once and exit (scripts, tests)")
    tp.add_argument("--iterations", type=int, default=0, help="stop after this many refreshes (0: until Ctrl-C)")

    co = verb("completion", "print the shell completion script: eval \"$(sluicectl completion bash)\"")
    co.add_argument("shell", choices=["bash", "zsh"])

    tk = verb("token", "bootstrap tokens for joining nodes (cluster-admin)")
    tk.add_argument("action", choices=["create", "list", "delete"])
    tk.add_argument("id", nargs="*", help="delete: token IDs")
    tk.add_argument("--ttl", default="", help="create: lifetime, e.g. 1h (default 1h, at most 30d)")
    tk.add_argument("--uses", type=int, default=0, help="create: how many joins it allows (default 1)")
    tk.add_argument("--description", default="")
    tk.add_argument("--print-join-command", action="store_true", help="create: print the whole join command")
    tk.add_argument("--join-address", default="", help="create: the token port address for the join command")

    au = verb("auth", "who the controller thinks you are")
    au.add_argument("action", choices=["whoami"])

    ce = verb("certs", "issue user credentials, revoke certificates (cluster-admin)")
    ce.add_argument("action", choices=["issue", "revoke"])
    ce.add_argument("serial", nargs="*", help="revoke: hexadecimal serials")
    ce.add_argument("--user")
    ce.add_argument("--group", action="append", default=[])
    ce.add_argument("--ttl", default="", help="issue: lifetime, e.g. 2160h (default 365 days)")
    ce.add_argument("--out", help="issue: write the user's client config here")
    ce.add_argument("--for-server", default="", help="issue: server address written into the config")

    sm = verb("simulate", "run one scheduling cycle over YAML files, no server needed")
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
        if cmd == "top":
            return await cmd_top(c, ns)
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
    # Shell completion: answers and exits when the shell asks (_ARGCOMPLETE set), else does nothing.
    argcomplete.autocomplete(parser, always_complete_options=False)
    ns: argparse.Namespace | None = None
    try:
        ns = parser.parse_args(argv)
        if ns.command == "completion":
            print(shellcode(["sluicectl"], shell=ns.shell), end="")
            return 0
        if ns.command == "simulate":
            return cmd_simulate(ns)
        return asyncio.run(_dispatch(ns))
    except UsageError as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except (ManifestError, SelectorError, jsonpath.TemplateError) as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return 1
    except clientconfig.ConfigError as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except ClientError as exc:
        if exc.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) and "store" not in exc.message:
            server = ns.server if ns is not None else "?"
            print(f"error: cannot reach the controller at {server}: {_one_line(exc.message)}", file=sys.stderr)
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
