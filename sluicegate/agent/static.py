"""Static pods: pod manifests in the agent's static-pod directory, run without the controller.

This is the kubelet's file source (``pkg/kubelet/config/file.go`` and
``common.go``) for processes:

* every regular, non-hidden file in the directory holds one Pod (YAML or
  JSON, ``apiVersion: v1``, ``kind: Pod``) in a minimal shape: metadata name
  and namespace, containers with command/args/env/workingDir/resources,
  restartPolicy (default Always, as for any bare pod), priorityClassName or
  priority, terminationGracePeriodSeconds;
* a file that cannot be used is logged once (naming the file and the field)
  and skipped; a pod started from an earlier, valid version of that file
  keeps running, because a typo in an edit should not take a node's critical
  component down with it;
* the pod's uid is derived from the node name, the file name and the parsed
  content (as the kubelet hashes host, source and pod), so an unchanged file
  maps to the same pod across agent restarts and is never started twice,
  while a changed file is a new pod: the old one is stopped first, then the
  new one admitted;
* a removed file stops its pod;
* static pods are critical, so node admission may preempt other pods for
  them, and pressure eviction never touches them.  The pod's name carries the
  node's name (``<name>-<node>``) as the kubelet's mirror pods do, and the
  controller sees it as a mirror pod whose requests count against the node.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from sluicegate.agent.node import AgentNode
from sluicegate.agent.pod import Container, Pod, RequestedSecurity, RestartPolicy
from sluicegate.agent.policy import SYSTEM_CLUSTER_CRITICAL, SYSTEM_NODE_CRITICAL
from sluicegate.agent.runtime import PodRuntimeError, Reason
from sluicegate.manifest.decode_workload import (
    CONTAINER_UNSUPPORTED,
    POD_SPEC_UNSUPPORTED,
    read_container,
)
from sluicegate.manifest.errors import FieldError
from sluicegate.manifest.reader import Fields, Problems
from sluicegate.manifest.syntax import (
    dns_label_problem,
    dns_subdomain_problem,
    label_value_problem,
    qualified_name_problem,
    show,
)

log = logging.getLogger(__name__)

# How often the directory is read again (seconds).  The kubelet's
# fileCheckFrequency is 20s; 5s keeps an edited manifest's turnaround short
# while a scan of a handful of small files stays negligible.
DEFAULT_SYNC_INTERVAL = 5.0

# A manifest is a page of YAML; anything this big is a mistake (a log or a
# binary dropped into the directory), and reading it every few seconds would hurt.
MAX_MANIFEST_BYTES = 1 << 20

# The built-in PriorityClasses, the only ones a node knows without the controller.
NODE_PRIORITY_CLASSES: Mapping[str, int] = {
    "system-node-critical": SYSTEM_NODE_CRITICAL,
    "system-cluster-critical": SYSTEM_CLUSTER_CRITICAL,
}

RESTART_POLICIES = ("Always", "OnFailure", "Never")
DEFAULT_GRACE_SECONDS = 30

ROOT_FIELDS = ("apiVersion", "kind", "metadata", "spec")
METADATA_FIELDS = ("name", "namespace", "labels", "annotations")
METADATA_UNSUPPORTED = {
    "uid": "a static pod's uid is derived from the node, the file name and its content",
    "generateName": "a static pod needs a fixed name",
}
STATIC_SPEC_FIELDS = ("containers", "restartPolicy", "priorityClassName", "priority", "terminationGracePeriodSeconds")
# Listed here rather than shared with workloads: a field workloads learn to
# read must not become a field static pods silently ignore.
STATIC_CONTAINER_FIELDS = ("name", "command", "args", "env", "workingDir", "resources", "securityContext")
STATIC_CONTAINER_UNSUPPORTED = {
    **CONTAINER_UNSUPPORTED,
    "readinessProbe": "readiness probes are not supported for static pods",
}
STATIC_SPEC_UNSUPPORTED = {
    **{k: v for k, v in POD_SPEC_UNSUPPORTED.items() if k != "priority"},
    "nodeSelector": "a static pod runs on the node whose directory holds its manifest",
    "initContainers": "init containers are not supported for static pods",
    "securityContext": "set securityContext on each container of a static pod",
}


class StaticPodManifestError(Exception):
    """A static pod manifest that cannot be used; the file is skipped until it changes.

    ``file`` is the manifest's path, ``errors`` every problem found, each
    naming its field.
    """

    def __init__(self, *, file: str, errors: Sequence[FieldError]) -> None:
        self.file = file
        self.errors = tuple(errors)
        detail = "; ".join(str(e) for e in self.errors)
        super().__init__(f"static pod manifest {file}: {detail}; the file is skipped until it is fixed")


def static_uid(*, node_name: str, file_name: str, document: object) -> str:
    """The uid of the pod a manifest describes: a hash of node, file name and parsed content.

    The parsed document is hashed (canonical JSON), not the bytes, so
    editing a comment or the indentation does not restart a critical pod.
    """
    digest = hashlib.sha256()
    digest.update(f"host:{node_name}\0file:{file_name}\0".encode())
    digest.update(json.dumps(document, sort_keys=True, separators=(",", ":"), default=str).encode())
    return "static-" + digest.hexdigest()[:32]


def _check_exact(fields: Fields, key: str, wanted: str) -> None:
    value = fields.string(key, required=True)
    if value and value != wanted:
        fields.error(key, f"must be {show(wanted)} for a static pod, got {show(value)}")


def _container(raw: object, path: str, problems: Problems, names: dict[str, str]) -> Container | None:
    c = read_container(raw, path, problems, names, known=STATIC_CONTAINER_FIELDS,
                       unsupported=dict(STATIC_CONTAINER_UNSUPPORTED))
    if c is None:
        return None
    if not c.command:
        problems.add(f"{path}.command", "required: there is no container image to supply an entrypoint")
    return Container(
        name=c.name, command=c.command, args=c.args, env=c.env, working_dir=c.working_dir or None,
        requests=dict(c.requests), limits=dict(c.limits),
        # Checked against the agent's podUsers like any pod (AgentNode.run_pod).
        security=None if (sc := c.security_context) is None else RequestedSecurity(
            run_as_user=sc.run_as_user, run_as_group=sc.run_as_group, run_as_non_root=sc.run_as_non_root,
            allow_privilege_escalation=sc.allow_privilege_escalation),
    )


def _priority(spec: Fields) -> tuple[int, str]:
    class_name = spec.string("priorityClassName", check=dns_subdomain_problem)
    explicit = spec.integer("priority")
    known = NODE_PRIORITY_CLASSES.get(class_name)
    if class_name and known is None and explicit is None:
        spec.error(
            "priorityClassName",
            f"{show(class_name)} is not known on the node, which only knows "
            f"{', '.join(NODE_PRIORITY_CLASSES)}; name one of those or also set spec.priority",
        )
        return 0, class_name
    if known is not None and explicit is not None and explicit != known:
        spec.error("priority", f"must be {known} (the value of {class_name}) or absent, got {explicit}")
    if explicit is not None:
        return explicit, class_name
    return known or 0, class_name


def parse_manifest(*, file_name: str, content: bytes, node_name: str, path: str = "") -> Pod:
    """Read one static pod manifest; raise :class:`StaticPodManifestError` naming every bad field.

    ``file_name`` is the name within the static-pod directory (it is part of
    the uid); ``path`` is only used in messages (defaults to ``file_name``).
    """
    where = path or file_name
    try:
        docs = [d for d in yaml.safe_load_all(content) if d is not None]
    except yaml.YAMLError as exc:
        raise StaticPodManifestError(file=where, errors=[FieldError("", f"not valid YAML or JSON: {exc}")]) from None
    if len(docs) != 1:
        raise StaticPodManifestError(
            file=where, errors=[FieldError("", f"must hold exactly one Pod document, found {len(docs)}")])
    document = docs[0]
    problems = Problems()
    root = Fields.of(document, "", problems, known=ROOT_FIELDS, unsupported={"status": "the agent reports status"})
    if root is None:
        raise StaticPodManifestError(file=where, errors=problems.items)
    _check_exact(root, "apiVersion", "v1")
    _check_exact(root, "kind", "Pod")
    meta = root.mapping("metadata", known=METADATA_FIELDS, unsupported=METADATA_UNSUPPORTED, required=True)
    name, namespace = "", "default"
    if meta is not None:
        name = meta.string("name", required=True, check=dns_subdomain_problem)
        namespace = meta.string("namespace", default="default", check=dns_label_problem) or "default"
        meta.string_map("labels", key_check=qualified_name_problem, value_check=label_value_problem)
        meta.string_map("annotations", key_check=qualified_name_problem)
    spec = root.mapping("spec", known=STATIC_SPEC_FIELDS, unsupported=STATIC_SPEC_UNSUPPORTED, required=True)
    containers: list[Container] = []
    restart, grace, priority, priority_class = "Always", DEFAULT_GRACE_SECONDS, 0, ""
    if spec is not None:
        names: dict[str, str] = {}
        for cpath, raw in spec.items("containers", required=True, min_items=1):
            container = _container(raw, cpath, problems, names)
            if container is not None:
                containers.append(container)
        restart = spec.choice("restartPolicy", {p: p for p in RESTART_POLICIES}, default="Always")
        grace = spec.integer("terminationGracePeriodSeconds", default=DEFAULT_GRACE_SECONDS, minimum=0) or 0
        priority, priority_class = _priority(spec)
    if problems:
        raise StaticPodManifestError(file=where, errors=problems.items)
    return Pod(
        uid=static_uid(node_name=node_name, file_name=file_name, document=document),
        # The kubelet names the mirror pod after the node, so static pods of
        # different nodes never collide in the controller's view.
        name=f"{name}-{node_name.lower()}",
        namespace=namespace,
        workload="",
        pod_set="",
        index=0,
        containers=tuple(containers),
        restart_policy=RestartPolicy(restart),
        termination_grace_seconds=float(grace),
        priority=priority,
        priority_class=priority_class,
        static=True,
        source=file_name,
    )


@dataclass(frozen=True, slots=True)
class Scan:
    """One reading of the directory: usable manifests and broken ones, by file name."""

    wishes: Mapping[str, Pod]
    errors: Mapping[str, StaticPodManifestError]


def scan_directory(directory: Path, *, node_name: str) -> Scan:
    """Parse every regular, non-hidden file in ``directory`` (which must exist).

    Two files defining the same namespace/name make the later one (by file
    name) an error, as the kubelet refuses duplicate full names.
    """
    wishes: dict[str, Pod] = {}
    errors: dict[str, StaticPodManifestError] = {}
    owners: dict[tuple[str, str], str] = {}
    for entry in sorted(directory.iterdir(), key=lambda p: p.name):
        # Editors and tools write hidden temporaries next to the real file.
        if entry.name.startswith(".") or not entry.is_file():
            continue
        try:
            size = entry.stat().st_size
            if size > MAX_MANIFEST_BYTES:
                raise StaticPodManifestError(file=str(entry), errors=[FieldError(
                    "", f"is {size} bytes, more than the {MAX_MANIFEST_BYTES} a pod manifest may have")])
            wish = parse_manifest(file_name=entry.name, content=entry.read_bytes(), node_name=node_name,
                                  path=str(entry))
        except StaticPodManifestError as exc:
            errors[entry.name] = exc
            continue
        except OSError as exc:
            # Vanished between listing and reading, or unreadable: judged on the next scan.
            errors[entry.name] = StaticPodManifestError(file=str(entry), errors=[FieldError("", f"cannot read: {exc}")])
            continue
        key = (wish.namespace, wish.name)
        if key in owners:
            errors[entry.name] = StaticPodManifestError(file=str(entry), errors=[FieldError(
                "metadata.name", f"pod {wish.namespace}/{wish.name} is already defined by {owners[key]}")])
            continue
        owners[key] = entry.name
        wishes[entry.name] = wish
    return Scan(wishes=wishes, errors=errors)


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What one pass changed (uids), for logs and tests."""

    started: tuple[str, ...] = ()
    stopped: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


class StaticPods:
    """Keeps the node's static pods in line with the manifests in ``directory``.

    Call :meth:`sync` once before the agent registers with the controller (so
    the controller learns of the static pods with the first report), then
    run :meth:`run` under the supervisor.
    """

    def __init__(self, *, node: AgentNode, directory: Path, interval: float = DEFAULT_SYNC_INTERVAL) -> None:
        self.node = node
        self.directory = Path(directory)
        self.interval = interval
        # What was last logged per broken file, so each problem is logged once.
        self._reported: dict[str, str] = {}
        self._directory_problem = ""

    def _scan(self) -> Scan | None:
        try:
            scan = scan_directory(self.directory, node_name=self.node.name)
        except OSError as exc:
            problem = f"static pod directory {self.directory} cannot be read ({exc}); static pods are left as they are"
            if problem != self._directory_problem:
                log.error("%s", problem)
                self._directory_problem = problem
            return None
        if self._directory_problem:
            log.info("static pod directory %s is readable again", self.directory)
            self._directory_problem = ""
        for file, err in scan.errors.items():
            if self._reported.get(file) != str(err):
                log.error("%s", err)
                self._reported[file] = str(err)
        for file in list(self._reported):
            if file not in scan.errors:
                del self._reported[file]
                if file in scan.wishes:
                    log.info("static pod manifest %s is valid again", self.directory / file)
        return scan

    async def sync(self) -> SyncResult:
        """One pass: stop pods whose manifest went away or changed, start new ones."""
        scan = self._scan()
        if scan is None:
            return SyncResult()
        wanted = {w.uid: w for w in scan.wishes.values()}
        stopping: list[str] = []
        removed: list[str] = []
        for m in self.node.static_pods():
            # A broken file keeps the pod of its last good version.
            if m.uid in wanted or m.source in scan.errors:
                continue
            st = self.node.runtime.status(m.uid)
            if st is None or st.finished:
                # Removed one pass after it ended, so that its final status
                # has been reported and the controller stops counting it.
                await self.node.remove(m.uid)
                removed.append(m.uid)
            else:
                stopping.append(m.uid)
        if stopping:
            await asyncio.gather(*(self._stop(uid) for uid in stopping))
        started: list[str] = []
        for file, wish in scan.wishes.items():
            known = self.node.meta.get(wish.uid)
            if known is not None and not known.rejected:
                continue
            if known is not None:
                # The kubelet leaves a rejected static pod failed; a critical
                # pod is worth retrying once something may have left the node.
                await self.node.remove(wish.uid)
            log.info("static pod %s/%s from %s: admitting", wish.namespace, wish.name, self.directory / file)
            await self.node.run_pod(wish)
            started.append(wish.uid)
        return SyncResult(started=tuple(started), stopped=tuple(stopping), removed=tuple(removed))

    async def _stop(self, uid: str) -> None:
        m = self.node.meta[uid]
        message = f"static pod manifest {self.directory / m.source} was removed or changed"
        log.info("static pod %s/%s: stopping: %s", m.namespace, m.name, message)
        try:
            await self.node.runtime.stop(uid, grace_seconds=m.grace_seconds, reason=Reason.KILLED, message=message)
        except PodRuntimeError as exc:
            log.error("static pod %s/%s could not be stopped: %s", m.namespace, m.name, exc)

    async def run(self) -> None:
        """Sync every ``interval`` seconds for as long as the agent runs."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.sync()
            except (OSError, PodRuntimeError) as exc:
                # The next pass retries; pods already running are unaffected.
                log.error("static pod sync failed: %s", exc)
