"""Model values -> manifest documents (the inverse of :mod:`sluicegate.manifest.decode`).

Kueue kinds are written as ``sluicegate.io/v1beta2``; PriorityClass as
``scheduling.k8s.io/v1``, Namespace as ``v1`` and the Configuration as
``sluicegate.io/v1beta2`` (Kueue v1beta2 with explicit ``enable`` flags).
Quantities use :func:`sluicegate.quantity.format_canonical` and times are
RFC 3339 in UTC.  For every valid object ``decode(encode(x)) == x``.

Two things are not written because the model derives them: a PodSet's
``requests`` (recomputed from its containers) and the labels/annotations of
pod templates (not kept by the model).
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sluicegate.manifest.decode_status import ACCUMULATED_V1BETA2
from sluicegate.manifest.decode_workload import POD_PRIORITY_GROUP, WORKLOAD_PRIORITY_GROUP
from sluicegate.manifest.dialect import CORE_V1, SCHEDULING_V1, SLUICEGATE_V1BETA2
from sluicegate.manifest.refs import Decoded, object_ref
from sluicegate.manifest.syntax import decimal_text
from sluicegate.manifest.timefmt import format_duration, format_rfc3339
from sluicegate.model import (
    Admission,
    AdmissionFairSharingStatus,
    ClusterQueueSpec,
    CohortSpec,
    Condition,
    Container,
    ControllerConfig,
    LabelSelector,
    LocalQueueSpec,
    Namespace,
    PodSet,
    PriorityClass,
    ResourceFlavor,
    ResourceGroup,
    Topology,
    TopologyAssignment,
    TopologyRequest,
    Workload,
    WorkloadPriorityClass,
    WorkloadStatus,
)
from sluicegate.model.config import FairSharingConfig, WaitForPodsReadyConfig
from sluicegate.model.podgroups import BatchQueue, PodGroup
from sluicegate.model.pods import PodRecord
from sluicegate.model.queues import FlavorFungibility, Preemption
from sluicegate.model.slotinit import slot_init
from sluicegate.model.taints import Taint, Toleration
from sluicegate.model.workloads import NO_STATUS, Probe, SecurityContext
from sluicegate.quantity import format_canonical
from sluicegate.strictjson import compact_encoder

# object_ref is re-exported: callers that encode usually need the identity too.
__all__ = ["EncodedObject", "encode", "encode_json", "object_ref"]

Doc = dict[str, object]

_GROUP_FOR_KIND = {"WorkloadPriorityClass": WORKLOAD_PRIORITY_GROUP, "PriorityClass": POD_PRIORITY_GROUP}


def encode(obj: Decoded) -> Doc:
    """The manifest document for a model object (plain dicts, lists, str, int, bool).

    The document is the caller's to change: nothing in it is shared with ``obj``.
    """
    return _encode(obj, share=False)


# slot_init: one is made at every write of every object.
@slot_init
@dataclass(frozen=True, slots=True)
class EncodedObject:
    """An object's JSON text, as the store keeps it, and where its metadata closes.

    The store holds the body without ``metadata.resourceVersion`` (the version
    is the store's own column, known only once the write committed); API
    readers get it inside ``metadata``, spliced in by
    :meth:`with_resource_version` instead of encoding the object again.
    """

    body: bytes
    # Index of the "}" that closes the top-level metadata mapping (-1: none).
    metadata_end: int

    def with_resource_version(self, version: int) -> bytes:
        """The body with ``"resourceVersion":"<version>"`` as the last key of ``metadata``.

        Byte for byte what ``json.dumps(doc, separators=(",", ":"))`` writes
        for ``encode(obj)`` with ``doc["metadata"]["resourceVersion"] = str(version)``.
        """
        end = self.metadata_end
        if end < 0:
            return self.body
        body = self.body
        key = b'"resourceVersion":"' if body[end - 1] == 0x7B else b',"resourceVersion":"'  # 0x7B: "{", empty metadata
        return b"".join((body[:end], key, str(version).encode(), b'"', body[end:]))


# Compact separators, ASCII only: the output's byte offsets are its character offsets.
_to_json = compact_encoder()
_str_json: Callable[[str], str] = json.encoder.encode_basestring_ascii  # what _to_json writes for a str


# A workload's pod sets are immutable and, for workloads of one shape,
# shared (decode_workload decodes each distinct podSets once).  Their JSON is
# written once per shared value and spliced into every write of every
# workload that has it: ``encode_json`` puts this marker where the podSets go
# (no validated spec field can hold a NUL) and swaps in the cached text.
_POD_SETS_MARK = "\x00podSets\x00"
_POD_SETS_MARK_JSON = json.dumps(_POD_SETS_MARK)
POD_SETS_JSON_SIZE = 4096
# id(pod sets) -> (the pod sets, kept so the id stays theirs; their JSON).
_pod_sets_json: OrderedDict[int, tuple[tuple[PodSet, ...], str]] = OrderedDict()


def _pod_sets_text(pod_sets: tuple[PodSet, ...]) -> str:
    hit = _pod_sets_json.get(id(pod_sets))
    if hit is not None and hit[0] is pod_sets:
        return hit[1]
    text = _to_json([_pod_set(ps) for ps in pod_sets])
    if len(_pod_sets_json) >= POD_SETS_JSON_SIZE:
        _pod_sets_json.popitem(last=False)
    _pod_sets_json[id(pod_sets)] = (pod_sets, text)
    return text


def encode_json(obj: Decoded) -> EncodedObject:
    """``encode(obj)`` as compact JSON, encoded once for the store, watch events and replies.

    Top-level keys keep ``encode``'s order; the metadata's closing brace is
    located while writing, so no one has to search the text for it.
    """
    if type(obj) is Workload or isinstance(obj, Workload):  # (the exact type first: most writes are workloads')
        return _workload_json(obj)
    return _json_of(_encode(obj, share=True))


def _json_of(doc: Doc) -> EncodedObject:
    text, metadata_end = _json_text(doc)
    return EncodedObject(text.encode("ascii"), metadata_end)


def _json_text(doc: Doc, pod_sets: tuple[PodSet, ...] | None = None, *, close: bool = True) -> tuple[str, int]:
    """The document's JSON (``close`` False: without its last "}") and where its metadata closes."""
    text = ["{"]
    size = 1
    metadata_end = -1
    for key, value in doc.items():
        encoded = _str_json(value) if type(value) is str else _to_json(value)
        if key == "spec" and pod_sets is not None:
            encoded = encoded.replace(_POD_SETS_MARK_JSON, _pod_sets_text(pod_sets), 1)
        piece = f"{',' if size > 1 else ''}{_str_json(key)}:{encoded}"
        text.append(piece)
        size += len(piece)
        if key == "metadata" and isinstance(value, dict):
            metadata_end = size - 1
    if close:
        text.append("}")
    return "".join(text), metadata_end


# A workload is written again at each change of its status (admission, every
# pod report), its metadata and spec unchanged: their JSON is kept per
# workload while they are the very same values (model objects are immutable;
# ``replace`` keeps the fields it does not change).  Sized for a large pending
# population: a workload is usually admitted long after it was created, after
# tens of thousands of others (a head's own metadata is ~0.3 KiB, its spec shared; 50,000 pending cost
# ~20 MiB with their entries).
_WORKLOAD_HEADS_SIZE = 262_144
# OrderedDicts: dropping the oldest is O(1) (``del d[next(iter(d))]`` on a dict walks past every
# slot emptied at its front, which at 200,000 pending made the status pieces' eviction 9 % of a cycle).
# Each entry: the head's key (the fields it is written from), its JSON in two pieces (the metadata's own,
# up to the spec's value, and the spec's, shared by the workloads of one shape: see _workload_head), where
# its metadata closes, and the status conditions and admission of the workload's last write with their
# JSON (the conditions' as the pieces of text between the brackets, see _conditions_parts).
_workload_heads: OrderedDict[
    tuple[str, str],
    tuple[tuple[object, ...], str, str, int, tuple[Condition, ...], tuple[str, ...], Admission | None, str],
] = OrderedDict()

# The text a workload's document is joined from, beyond its pieces' own.
_STATUS_CONDITIONS = ',"status":{"conditions":['
_ADMISSION_AFTER_CONDITIONS = '],"admission":'
_PODS_AFTER_ADMISSION = ',"extra":{"pods":['
_PODS_CLOSE = "]}}}"  # the pods, extra, status and document closed


def _workload_json(wl: Workload) -> EncodedObject:
    ref = (wl.namespace, wl.name)
    status = wl.status
    conditions = status.conditions
    # A finished workload's write is usually its last: what was kept for it goes (and nothing is kept
    # for it from now on), or a replay of 50,000 short workloads ends holding ~40 MiB of their heads.
    # Finished is the last condition a workload gets: only that one is looked at (a workload that
    # gets another after it keeps its entries until they are the oldest, the bytes are the same).
    if conditions:
        last = conditions[-1]
        finished = last.type == "Finished" and last.status == "True"
    else:
        finished = False
    key = (wl.uid, wl.generation, wl.creation_timestamp, wl.queue_name, wl.priority, wl.priority_class, wl.active,
           wl.maximum_execution_time_seconds, wl.pod_sets, wl.labels, wl.annotations)
    hit = _workload_heads.pop(ref, None) if finished else _workload_heads.get(ref)
    # The same head: the pod sets, labels and annotations the very same values (cheap, and kept alive
    # here; equal labels in another order are other JSON), then the whole key, the scalars by value (the
    # tuple compares each pair by identity first: a workload's fields passed on by ``replace`` cost no
    # __eq__).
    if hit is not None and (k := hit[0])[8] is key[8] and k[9] is key[9] and k[10] is key[10] and k == key:
        _, meta, spec, metadata_end, kept_conditions, kept_parts, kept_admission, kept_admission_text = hit
    else:
        meta, spec, metadata_end = _workload_head(wl)
        kept_conditions, kept_parts, kept_admission, kept_admission_text = (), (), None, ""
        if not finished:
            if hit is not None:
                del _workload_heads[ref]  # re-inserted last: the oldest entry goes first
            if len(_workload_heads) >= _WORKLOAD_HEADS_SIZE:
                _workload_heads.popitem(last=False)
    admission = status.admission
    # (Conditions or an admission: not the empty status, without comparing every field.)
    if not conditions and admission is None and (status is NO_STATUS or status == NO_STATUS):
        if not finished:
            _workload_heads[ref] = (key, meta, spec, metadata_end, (), (), None, "")
        return EncodedObject(f"{meta}{spec}}}".encode("ascii"), metadata_end)
    # Each change of a status appends a condition or replaces one, the others the very records of the last
    # write: their JSON is kept with the head and only the new ones are written.  The admission, one
    # value from the write that admitted the workload to the one that gives its quota back, likewise.
    if conditions is kept_conditions:
        parts = kept_parts
    else:
        parts = _conditions_parts(conditions, kept_conditions, kept_parts)
    if admission is None:
        admission_text = ""
    elif admission is kept_admission:
        admission_text = kept_admission_text
    else:
        admission_text = _piece_json(admission, _admission_json, _admission_pieces, _ADMISSION_PIECES_SIZE)
    if not finished:
        _workload_heads[ref] = (key, meta, spec, metadata_end, conditions, parts, admission, admission_text)
    pods = status.pods
    # The document is joined at once from its pieces: one string as long as the document (then its bytes),
    # nothing as long in between (each of those, beyond 512 bytes, is a malloc and a copy).
    if (status.requeue_state is not None or status.reclaimable_pods or status.accumulated_past_execution_time_seconds
            or status.extra or status.last_pods or status.deleting or status.terminate is not None):
        # The rarer shapes: piece by piece.
        text = f'{meta}{spec},"status":{_status_json(status, ref, "".join(parts), drop=finished)}}}'
    elif conditions and admission is not None and pods:
        # The usual status: its conditions, its admission, its pods.
        text = "".join((meta, spec, _STATUS_CONDITIONS, *parts, _ADMISSION_AFTER_CONDITIONS, admission_text,
                        _PODS_AFTER_ADMISSION, *_pods_parts(pods, ref, drop=finished), _PODS_CLOSE))
    else:
        out = [meta, spec, ',"status":{']
        if conditions:
            out += ('"conditions":[', *parts, "]")
        if admission is not None:
            out += (',"admission":' if conditions else '"admission":', admission_text)
        if pods:
            out += (',"extra":{"pods":[' if len(out) > 3 else '"extra":{"pods":[',
                    *_pods_parts(pods, ref, drop=finished), "]}")
        out.append("}}")
        text = "".join(out)
    if finished:
        _pod_lists.pop(ref, None)  # (kept still where the status had no pods)
    return EncodedObject(text.encode("ascii"), metadata_end)


def _conditions_parts(conditions: tuple[Condition, ...], kept: tuple[Condition, ...],
                      kept_parts: tuple[str, ...]) -> tuple[str, ...]:
    """The JSON of ``conditions`` as the pieces of text between the brackets, each condition's followed by a
    comma but the last's; ``kept`` (with ``kept_parts``, theirs) were the last write's: the same records at
    the same places are not written again, and no text joins them before the document does."""
    n = len(kept)
    m = len(conditions)
    # (The slice compares each pair by identity first: the same records cost no __eq__; equal ones are the
    # same JSON.)
    if n and m > n and conditions[:n] == kept:
        # The usual change: conditions appended to the same ones.
        if m == n + 1:
            return (*kept_parts, ",", _condition_json(conditions[n]))
        out = list(kept_parts)
        for c in conditions[n:]:
            out += (",", _condition_json(c))
        return tuple(out)
    # Otherwise (a condition replaced or dropped, or the first ones): each record the last write had at its
    # place keeps its JSON.
    out = []
    for i, c in enumerate(conditions):
        if i:
            out.append(",")
        out.append(kept_parts[2 * i] if i < n and c is kept[i] else _condition_json(c))
    return tuple(out)


# The JSON of a new workload's head is written from pieces that workloads share: the spec (workloads
# submitted in bulk share a few specs, their pod sets one value each) and the label set (shared by the
# decoder) are kept by value and identity; only the names, uid and time are written per workload.
_SPECS_JSON_SIZE = 4096
_specs_json: OrderedDict[tuple[object, ...], tuple[tuple[PodSet, ...], str]] = OrderedDict()
_LABELS_JSON_SIZE = 4096
_labels_json: OrderedDict[int, tuple[object, str]] = OrderedDict()
_WORKLOAD_HEAD_START = f'{{"apiVersion":{_str_json(SLUICEGATE_V1BETA2)},"kind":"Workload","metadata":{{"name":'


def _spec_json(wl: Workload) -> str:
    key = (wl.queue_name, id(wl.pod_sets), wl.priority_class, wl.priority, wl.active,
           wl.maximum_execution_time_seconds)
    hit = _specs_json.get(key)
    if hit is not None and hit[0] is wl.pod_sets:
        return hit[1]
    spec = _workload(wl, share=True, with_status=False)["spec"]
    text = _to_json(spec).replace(_POD_SETS_MARK_JSON, _pod_sets_text(wl.pod_sets), 1)
    if len(_specs_json) >= _SPECS_JSON_SIZE:
        _specs_json.popitem(last=False)
    _specs_json[key] = (wl.pod_sets, text)
    return text


def _map_json(value: Mapping[str, str]) -> str:
    return _to_json(dict(value))


def _workload_head(wl: Workload) -> tuple[str, str, int]:
    """``_json_text(_workload(wl, share=True, with_status=False), wl.pod_sets, close=False)``, the same text,
    from the kept JSON of its spec and labels, in two pieces: up to the spec's value (``,"spec":`` included),
    and the spec's (the very string every workload of that spec has: a workload kept for its next write
    holds only its own metadata), and where its metadata closes."""
    if wl.priority_class is not None and wl.priority_class[0] not in _GROUP_FOR_KIND:
        text, end = _json_text(_workload(wl, share=True, with_status=False), wl.pod_sets, close=False)  # raises
        return text[:end + 9], text[end + 9:], end  # (split after the metadata's '},"spec":')
    s = _str_json
    # One f-string, its optional members empty when absent: a head is written at every workload's creation.
    uid = f',"uid":{s(wl.uid)}' if wl.uid else ""
    created = f',"creationTimestamp":"{format_rfc3339(wl.creation_timestamp)}"' if wl.creation_timestamp else ""
    labels = f',"labels":{_piece_json(wl.labels, _map_json, _labels_json, _LABELS_JSON_SIZE)}' if wl.labels else ""
    annotations = f',"annotations":{_to_json(dict(wl.annotations))}' if wl.annotations else ""
    meta = (f'{_WORKLOAD_HEAD_START}{s(wl.name)},"namespace":{s(wl.namespace)}{uid}{created}{labels}{annotations}'
            f',"generation":{_num_json(wl.generation)}}},"spec":')
    return meta, _spec_json(wl), len(meta) - 9  # (the metadata's closing brace, before ',"spec":')


# The parts of a workload's status that most writes leave as they were (its
# conditions, its admission, its pods: model objects are immutable and
# ``replace`` keeps what it does not change) have their JSON kept by
# identity, so a write encodes only what changed: a pod report re-encodes
# that pod, not every pod of the workload.
_STATUS_PIECES_SIZE = 16_384
# id(piece) -> (the piece, kept so the id stays its own; its JSON).
_status_pieces: OrderedDict[int, tuple[object, str]] = OrderedDict()


# Admissions apart: one is shared by every workload admitted alike (Scheduler._admission), so they are
# few and each is read again and again, while every admission brings two new conditions; in one cache the
# conditions pushed the shared admissions out and they were encoded again every few thousand writes.
_ADMISSION_PIECES_SIZE = 16_384
_admission_pieces: OrderedDict[int, tuple[object, str]] = OrderedDict()


def _piece_json(piece: object, to_text: Callable[[Any], str],
                cache: OrderedDict[int, tuple[object, str]] = _status_pieces, size: int = _STATUS_PIECES_SIZE) -> str:
    hit = cache.get(id(piece))
    if hit is not None and hit[0] is piece:
        return hit[1]
    text = to_text(piece)
    if len(cache) >= size:
        cache.popitem(last=False)
    cache[id(piece)] = (piece, text)
    return text


_PHASE_KEY = ',"phase":'


def _pod_json(p: PodRecord, was: PodRecord | None = None, was_text: str = "") -> str:
    """``_to_json(p.to_json())``, written directly (the same bytes): a pod report makes a new record, so
    the JSON of a workload's changed pod is written at nearly every store of it.  ``was``: the record ``p``
    replaces, ``was_text`` its JSON; a report changes the pod's phase and what follows, so the text up to
    the phase is taken from it when the fields before are the very same values."""
    s = _str_json
    if (was is not None and p.uid is was.uid and p.name is was.name and p.pod_set is was.pod_set
            and p.index is was.index and p.node is was.node and p.requests is was.requests):
        # The last ',"phase":' is the record's own key: one inside a string would have its quotes escaped,
        # and the keys after it are fixed (a "phase" among the requests' keys comes before it).
        text = was_text[:was_text.rindex(_PHASE_KEY)] + _PHASE_KEY + s(p.phase)
    else:
        text = (f'{{"uid":{s(p.uid)},"name":{s(p.name)},"podSet":{s(p.pod_set)},"index":{_num_json(p.index)},'
                f'"node":{s(p.node)},"requests":{_requests_json(p.requests)},"phase":{s(p.phase)}')
    if p.reason:
        text += f',"reason":{s(p.reason)}'
    if p.message:
        text += f',"message":{s(p.message)}'
    if p.exit_code is not None:
        text += f',"exitCode":{_num_json(p.exit_code)}'
    if p.ready:
        text += ',"ready":true'
    if p.restarts:
        text += f',"restarts":{_num_json(p.restarts)}'
    if p.started_at is not None:
        text += f',"startedAt":{_num_json(p.started_at)}'
    if p.finished_at is not None:
        text += f',"finishedAt":{_num_json(p.finished_at)}'
    if p.exited:
        text += ',"exited":true'
    if p.replaced:
        text += ',"replaced":true'
    if p.qos_class:
        text += f',"qosClass":{s(p.qos_class)}'
    return text + "}"


_int_repr = int.__repr__
_float_repr = float.__repr__


def _num_json(v: object) -> str:
    """What ``_to_json`` writes for ``v``: ints and finite floats by their repr (as json does), the rest by json."""
    t = type(v)
    if t is int:
        return _int_repr(v)
    if t is float and v - v == 0.0:  # type: ignore[operator]  # finite (inf - inf and nan - nan are nan)
        return _float_repr(v)
    return _to_json(v)


def _requests_json(requests: Mapping[str, int]) -> str:
    if type(requests) is dict and len(requests) == 1:
        # The usual pod (one resource, an int of milli-units): no loop, no comprehension.
        [(k, v)] = requests.items()
        if type(k) is str and type(v) is int:
            return "{" + _str_json(k) + ":" + _int_repr(v) + "}"
    if type(requests) is not dict or len(requests) > 4:
        return _to_json(dict(requests))
    s = _str_json
    for k in requests:
        if type(k) is not str:
            return _to_json(dict(requests))
    return "{" + ",".join([f"{s(k)}:{_num_json(v)}" for k, v in requests.items()]) + "}"


def _admission_json(adm: Admission) -> str:
    return _to_json(_admission(adm))




# A condition's JSON up to its time, by (type, status, reason, message): conditions are made anew at each
# change of a status, but with few distinct texts (Kueue's reasons and messages name at most the cluster
# queue), so only the time is written per condition.
_CONDITION_HEADS_SIZE = 4096
_condition_heads: OrderedDict[tuple[str, str, str, str], str] = OrderedDict()


def _condition_json(c: Condition) -> str:
    """``_to_json(_condition(c))``, written directly (the same bytes): every change of a status makes new
    conditions, so their JSON is rarely kept from an earlier write."""
    key = (c.type, c.status, c.reason, c.message)
    head = _condition_heads.get(key)
    if head is None:
        s = _str_json
        head = (f'{{"type":{s(c.type)},"status":{s(c.status)},"reason":{s(c.reason)},"message":{s(c.message)},'
                '"lastTransitionTime":"')
        if len(_condition_heads) >= _CONDITION_HEADS_SIZE:
            _condition_heads.popitem(last=False)
        _condition_heads[key] = head
    return f'{head}{format_rfc3339(c.last_transition_time)}"}}'


# A workload's pods, as its last write held them, and their JSON: a pod report replaces one record of the
# tuple and keeps the others (``replace``), so the next write compares the records by identity, position by
# position, and encodes only the new one.  Kept for the workloads whose pods were written last (a running
# workload is written at each report of its pods; 0.2-0.4 KiB of JSON a pod, so at most a few MiB); beyond,
# the pods' JSON is written whole.  The oldest entry is the workload admitted first: an entry is updated in
# place (moving it last, a pop and an insert into the OrderedDict, cost more than its lookup).
_POD_LISTS_SIZE = 4_096
# (namespace, name) -> (the pods, their JSON as _pods_parts gives it).
_pod_lists: OrderedDict[tuple[str, str], tuple[tuple[PodRecord, ...], tuple[str, ...]]] = OrderedDict()


def _pods_parts(pods: tuple[PodRecord, ...], ref: tuple[str, str] | None, *, drop: bool = False) -> tuple[str, ...]:
    """The JSON of ``pods`` as the pieces of text between the brackets, each pod's followed by a comma but the
    last's; ``drop``: the workload's last write, what was kept for it goes."""
    if ref is None:
        out = []
        for i, p in enumerate(pods):
            if i:
                out.append(",")
            out.append(_piece_json(p, _pod_json, _status_pieces, _STATUS_PIECES_SIZE))
        return tuple(out)
    hit = _pod_lists.pop(ref, None) if drop else _pod_lists.get(ref)
    if hit is not None and len(kept := hit[0]) == len(pods):
        if len(pods) == 1:
            # A workload of one pod, the usual: no loop.
            if pods[0] is kept[0]:
                return hit[1]
            parts: tuple[str, ...] = (_pod_json(pods[0], kept[0], hit[1][0]),)
        else:
            was = hit[1]
            out = []
            for i, p in enumerate(pods):
                if i:
                    out.append(",")
                o = kept[i]
                out.append(was[2 * i] if p is o else _pod_json(p, o, was[2 * i]))
            parts = tuple(out)
    else:
        # New records (the workload's first pods) or ones dropped from memory: written, not looked up.
        out = []
        for i, p in enumerate(pods):
            if i:
                out.append(",")
            out.append(_pod_json(p))
        parts = tuple(out)
        if hit is None and len(_pod_lists) >= _POD_LISTS_SIZE and not drop:
            _pod_lists.popitem(last=False)
    if not drop:
        _pod_lists[ref] = (pods, parts)
    return parts


# status.extra keys that ``_status`` sets itself (an extra entry of the same name takes their place in order).
_OWN_EXTRA_KEYS = frozenset({"pods", "lastPods", "deleting", "terminate"})


def _status_json(status: WorkloadStatus, ref: tuple[str, str] | None = None, conditions_text: str | None = None,
                 *, drop: bool = False) -> str:
    """``_to_json(_status(status))``, spliced from the pieces' kept JSON (the same bytes); ``ref``, the
    workload's (namespace, name), lets its pods' JSON be kept from its last write (see _pods_parts; ``drop``:
    used a last time); ``conditions_text``: the conditions' JSON, comma-separated, when the caller has it."""
    extra_doc = status.extra
    if extra_doc and not _OWN_EXTRA_KEYS.isdisjoint(extra_doc):
        return _to_json(_status(status, share=True))  # rare: encoded whole
    parts: list[str] = []
    if status.conditions:
        if conditions_text is None:
            conditions_text = ",".join([_piece_json(c, _condition_json) for c in status.conditions])
        parts.append('"conditions":[' + conditions_text + "]")
    if status.admission is not None:
        parts.append('"admission":' + _piece_json(status.admission, _admission_json, _admission_pieces,
                                                  _ADMISSION_PIECES_SIZE))
    rq_state = status.requeue_state
    if rq_state is not None:
        rq: Doc = {"count": rq_state.count}
        if rq_state.requeue_at is not None:
            rq["requeueAt"] = format_rfc3339(rq_state.requeue_at)
        parts.append('"requeueState":' + _to_json(rq))
    if status.reclaimable_pods:
        parts.append('"reclaimablePods":' + _to_json(
            [{"name": name, "count": count} for name, count in status.reclaimable_pods.items()]))
    if status.accumulated_past_execution_time_seconds:
        parts.append(f"{_to_json(ACCUMULATED_V1BETA2)}:{_to_json(status.accumulated_past_execution_time_seconds)}")
    extra: list[str] = []
    if extra_doc:
        extra.append(_to_json(dict(extra_doc))[1:-1])  # its entries, in their order, without the braces
    if status.pods:
        extra.append('"pods":[' + "".join(_pods_parts(status.pods, ref, drop=drop)) + "]")
    if status.last_pods:
        extra.append('"lastPods":[' + "".join(_pods_parts(status.last_pods, None)) + "]")
    if status.deleting:
        extra.append('"deleting":true')
    if status.terminate is not None:
        extra.append('"terminate":' + _to_json({"reason": status.terminate[0], "message": status.terminate[1]}))
    if extra:
        parts.append('"extra":{' + ",".join(extra) + "}")
    return "{" + ",".join(parts) + "}"


def _encode(obj: Decoded, *, share: bool) -> Doc:
    # share=True may hand out the model's own nested mutable values (a
    # workload's status.extra); only for a document serialised at once.
    if isinstance(obj, ResourceFlavor):
        spec: Doc = {}
        if obj.node_labels:
            spec["nodeLabels"] = dict(obj.node_labels)
        if obj.node_taints:
            spec["nodeTaints"] = [taint_doc(t) for t in obj.node_taints]
        if obj.tolerations:
            spec["tolerations"] = [toleration_doc(t) for t in obj.tolerations]
        if obj.topology_name is not None:
            spec["topologyName"] = obj.topology_name
        return _object("ResourceFlavor", {"name": obj.name}, spec=spec)
    if isinstance(obj, Topology):
        return _object("Topology", {"name": obj.name}, spec={"levels": [{"nodeLabel": k} for k in obj.levels]})
    if isinstance(obj, CohortSpec):
        return _object("Cohort", {"name": obj.name}, spec=_cohort_spec(obj))
    if isinstance(obj, ClusterQueueSpec):
        return _object("ClusterQueue", {"name": obj.name}, spec=_cluster_queue_spec(obj))
    if isinstance(obj, LocalQueueSpec):
        return _local_queue(obj)
    if isinstance(obj, WorkloadPriorityClass):
        doc = _object("WorkloadPriorityClass", {"name": obj.name})
        doc["value"] = obj.value
        if obj.description:
            doc["description"] = obj.description
        return doc
    if isinstance(obj, PriorityClass):
        return _priority_class(obj)
    if isinstance(obj, Namespace):
        meta: Doc = {"name": obj.name}
        if obj.labels:
            meta["labels"] = dict(obj.labels)
        return {"apiVersion": CORE_V1, "kind": "Namespace", "metadata": meta}
    if isinstance(obj, Workload):
        return _workload(obj, share=share)
    if isinstance(obj, ControllerConfig):
        return _configuration(obj)
    if isinstance(obj, PodGroup):
        return _pod_group(obj)
    if isinstance(obj, BatchQueue):
        queue_spec: Doc = {"weight": obj.weight}
        if obj.capability:
            queue_spec["capability"] = _quantities(obj.capability)
        return {"apiVersion": obj.api_version, "kind": "Queue", "metadata": {"name": obj.name}, "spec": queue_spec}
    raise TypeError(f"cannot encode {type(obj).__name__}; expected one of the manifest kinds")


def _object(kind: str, metadata: Doc, *, spec: Doc | None = None) -> Doc:
    doc: Doc = {"apiVersion": SLUICEGATE_V1BETA2, "kind": kind, "metadata": metadata}
    if spec is not None:
        doc["spec"] = spec
    return doc


def _quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    return {res: format_canonical(res, qty) for res, qty in amounts.items()}


# -- queues ------------------------------------------------------------------


def _resource_groups(groups: tuple[ResourceGroup, ...]) -> list[Doc]:
    out: list[Doc] = []
    for rg in groups:
        flavors: list[Doc] = []
        for fq in rg.flavors:
            resources: list[Doc] = []
            for res, quota in fq.resources.items():
                entry: Doc = {"name": res, "nominalQuota": format_canonical(res, quota.nominal)}
                if quota.borrowing_limit is not None:
                    entry["borrowingLimit"] = format_canonical(res, quota.borrowing_limit)
                if quota.lending_limit is not None:
                    entry["lendingLimit"] = format_canonical(res, quota.lending_limit)
                resources.append(entry)
            flavors.append({"name": fq.name, "resources": resources})
        out.append({"coveredResources": list(rg.covered_resources), "flavors": flavors})
    return out


def _weight(weight: Fraction) -> Doc:
    return {"weight": decimal_text(weight)}


def _cohort_spec(cohort: CohortSpec) -> Doc:
    spec: Doc = {}
    if cohort.parent:
        spec["parentName"] = cohort.parent
    if cohort.resource_groups:
        spec["resourceGroups"] = _resource_groups(cohort.resource_groups)
    if cohort.fair_sharing_weight != 1:
        spec["fairSharing"] = _weight(cohort.fair_sharing_weight)
    return spec


def _cluster_queue_spec(cq: ClusterQueueSpec) -> Doc:
    spec: Doc = {}
    if cq.cohort:
        spec["cohortName"] = cq.cohort
    if cq.resource_groups:
        spec["resourceGroups"] = _resource_groups(cq.resource_groups)
    if cq.namespace_selector is not None:
        spec["namespaceSelector"] = _selector(cq.namespace_selector)
    spec["queueingStrategy"] = cq.queueing_strategy.value
    spec["preemption"] = _preemption(cq.preemption)
    spec["flavorFungibility"] = _fungibility(cq.flavor_fungibility)
    if cq.fair_sharing_weight != 1:
        spec["fairSharing"] = _weight(cq.fair_sharing_weight)
    spec["stopPolicy"] = cq.stop_policy.value
    if cq.admission_mode is not None:
        spec["admissionScope"] = {"admissionMode": cq.admission_mode.value}
    if cq.min_admit_duration is not None:
        spec["minAdmitDuration"] = format_duration(cq.min_admit_duration)
    return spec


def _local_queue(lq: LocalQueueSpec) -> Doc:
    spec: Doc = {"clusterQueue": lq.cluster_queue, "stopPolicy": lq.stop_policy.value}
    if lq.fair_sharing_weight != 1:
        spec["fairSharing"] = _weight(lq.fair_sharing_weight)
    doc = _object("LocalQueue", {"name": lq.name, "namespace": lq.namespace}, spec=spec)
    afs = lq.admission_fair_sharing_status
    if afs is not None:
        doc["status"] = {"fairSharing": {"admissionFairSharingStatus": admission_fair_sharing_status(afs)}}
    return doc


def admission_fair_sharing_status(afs: AdmissionFairSharingStatus) -> Doc:
    """status.fairSharing.admissionFairSharingStatus: consumed resources rounded to the base unit."""
    return {
        "consumedResources": {
            res: format_canonical(res, round(v)) for res, v in sorted(afs.consumed_resources.items())
        },
        "lastUpdate": format_rfc3339(afs.last_update),
    }


def _selector(selector: LabelSelector) -> Doc:
    out: Doc = {}
    if selector.match_labels:
        out["matchLabels"] = dict(selector.match_labels)
    if selector.match_expressions:
        exprs: list[Doc] = []
        for req in selector.match_expressions:
            expr: Doc = {"key": req.key, "operator": req.operator}
            if req.values:
                expr["values"] = list(req.values)
            exprs.append(expr)
        out["matchExpressions"] = exprs
    return out


def _preemption(p: Preemption) -> Doc:
    borrow: Doc = {"policy": p.borrow_within_cohort.value}
    if p.max_priority_threshold is not None:
        borrow["maxPriorityThreshold"] = p.max_priority_threshold
    return {
        "withinClusterQueue": p.within_cluster_queue.value,
        "reclaimWithinCohort": p.reclaim_within_cohort.value,
        "borrowWithinCohort": borrow,
    }


def _fungibility(ff: FlavorFungibility) -> Doc:
    out: Doc = {"whenCanBorrow": ff.when_can_borrow.value, "whenCanPreempt": ff.when_can_preempt.value}
    if ff.preference is not None:
        out["preference"] = ff.preference.value
    return out


def _priority_class(pc: PriorityClass) -> Doc:
    doc: Doc = {"apiVersion": SCHEDULING_V1, "kind": "PriorityClass", "metadata": {"name": pc.name}, "value": pc.value}
    if pc.global_default:
        doc["globalDefault"] = True
    if pc.description:
        doc["description"] = pc.description
    doc["preemptionPolicy"] = pc.preemption_policy
    return doc


# -- workloads -----------------------------------------------------------------


def _workload(wl: Workload, *, share: bool, with_status: bool = True) -> Doc:
    """``with_status`` False: metadata and spec only (what _workload_json keeps per workload)."""
    meta = _namespaced_meta(wl)
    meta["generation"] = wl.generation
    # share: encode_json splices in the pod sets' JSON, written once per shared value.
    pod_sets = _POD_SETS_MARK if share else [_pod_set(ps) for ps in wl.pod_sets]
    spec: Doc = {"queueName": wl.queue_name, "podSets": pod_sets}
    if wl.priority_class is not None:
        kind, name = wl.priority_class
        if kind not in _GROUP_FOR_KIND:
            raise ValueError(
                f"workload {wl.key}: priority class kind {kind!r} is neither WorkloadPriorityClass nor PriorityClass"
            )
        spec["priorityClassRef"] = {"group": _GROUP_FOR_KIND[kind], "kind": kind, "name": name}
    spec["priority"] = wl.priority
    spec["active"] = wl.active
    if wl.maximum_execution_time_seconds is not None:
        spec["maximumExecutionTimeSeconds"] = wl.maximum_execution_time_seconds
    doc = _object("Workload", meta, spec=spec)
    if with_status and wl.status is not NO_STATUS and wl.status != NO_STATUS:
        doc["status"] = _status(wl.status, share=share)
    return doc


def _namespaced_meta(obj: Workload | PodGroup) -> Doc:
    meta: Doc = {"name": obj.name, "namespace": obj.namespace}
    if obj.uid:
        meta["uid"] = obj.uid
    if obj.creation_timestamp:
        meta["creationTimestamp"] = format_rfc3339(obj.creation_timestamp)
    if obj.labels:
        meta["labels"] = dict(obj.labels)
    if obj.annotations:
        meta["annotations"] = dict(obj.annotations)
    return meta


def _pod_group(pg: PodGroup) -> Doc:
    meta = _namespaced_meta(pg)
    spec: Doc = {"minMember": pg.min_member, "queue": pg.queue}
    if pg.priority_class_name:
        spec["priorityClassName"] = pg.priority_class_name
    if pg.min_resources:
        spec["minResources"] = _quantities(pg.min_resources)
    return {"apiVersion": pg.api_version, "kind": "PodGroup", "metadata": meta, "spec": spec}


def _pod_set(ps: PodSet) -> Doc:
    pod: Doc = {"containers": [_container(c) for c in ps.containers]}
    if ps.init_containers:
        pod["initContainers"] = [_container(c) for c in ps.init_containers]
    if ps.node_selector:
        pod["nodeSelector"] = dict(ps.node_selector)
    if ps.tolerations:
        pod["tolerations"] = [toleration_doc(t) for t in ps.tolerations]
    if ps.priority_class_name:
        pod["priorityClassName"] = ps.priority_class_name
    pod["restartPolicy"] = ps.restart_policy
    pod["terminationGracePeriodSeconds"] = ps.termination_grace_period_seconds
    if ps.security_context is not None:
        pod["securityContext"] = _security_context(ps.security_context)
    out: Doc = {"name": ps.name, "count": ps.count}
    if ps.min_count is not None:
        out["minCount"] = ps.min_count
    if ps.topology_request is not None:
        out["topologyRequest"] = topology_request_doc(ps.topology_request)
    out["template"] = {"spec": pod}
    return out


def topology_request_doc(tr: TopologyRequest) -> Doc:
    out: Doc = {}
    if tr.required is not None:
        out["required"] = tr.required
    if tr.preferred is not None:
        out["preferred"] = tr.preferred
    if tr.unconstrained:
        out["unconstrained"] = True
    if tr.slice_required is not None:
        out["podSetSliceRequiredTopology"] = tr.slice_required
    if tr.slice_size is not None:
        out["podSetSliceSize"] = tr.slice_size
    return out


def topology_assignment_doc(ta: TopologyAssignment) -> Doc:
    """Kueue v1beta2's compact form: one slice; a level whose values are all equal is ``universal``,
    as are equal pod counts."""
    values: list[Doc] = []
    for i in range(len(ta.levels)):
        column = [d.values[i] for d in ta.domains]
        if column and all(v == column[0] for v in column):
            values.append({"universal": column[0]})
        else:
            values.append({"individual": {"roots": column}})
    counts = [d.count for d in ta.domains]
    pod_counts: Doc = {"universal": counts[0]} if counts and all(c == counts[0] for c in counts) \
        else {"individual": counts}
    return {
        "levels": list(ta.levels),
        "slices": [{"domainCount": len(ta.domains), "valuesPerLevel": values, "podCounts": pod_counts}],
    }


def taint_doc(t: Taint) -> Doc:
    out: Doc = {"key": t.key}
    if t.value:
        out["value"] = t.value
    out["effect"] = t.effect
    return out


def toleration_doc(t: Toleration) -> Doc:
    out: Doc = {}
    if t.key:
        out["key"] = t.key
    out["operator"] = t.operator
    if t.value:
        out["value"] = t.value
    if t.effect:
        out["effect"] = t.effect
    if t.toleration_seconds is not None:
        out["tolerationSeconds"] = t.toleration_seconds
    return out


def _container(c: Container) -> Doc:
    out: Doc = {"name": c.name}
    if c.command:
        out["command"] = list(c.command)
    if c.args:
        out["args"] = list(c.args)
    if c.env:
        out["env"] = [{"name": name, "value": value} for name, value in c.env]
    if c.working_dir:
        out["workingDir"] = c.working_dir
    resources: Doc = {}
    if c.requests:
        resources["requests"] = _quantities(c.requests)
    if c.limits:
        resources["limits"] = _quantities(c.limits)
    if resources:
        out["resources"] = resources
    if c.readiness_probe is not None:
        out["readinessProbe"] = _probe(c.readiness_probe)
    if c.security_context is not None:
        out["securityContext"] = _security_context(c.security_context)
    return out


def _security_context(sc: SecurityContext) -> Doc:
    out: Doc = {}
    for key, value in (
        ("runAsUser", sc.run_as_user),
        ("runAsGroup", sc.run_as_group),
        ("runAsNonRoot", sc.run_as_non_root),
        ("allowPrivilegeEscalation", sc.allow_privilege_escalation),
    ):
        if value is not None:
            out[key] = value
    return out


def _probe(p: Probe) -> Doc:
    out: Doc = {}
    if p.exec_command:
        out["exec"] = {"command": list(p.exec_command)}
    elif p.tcp_port is not None:
        out["tcpSocket"] = {"port": p.tcp_port}
    elif p.http_port is not None:
        out["httpGet"] = {"path": p.http_path or "/", "port": p.http_port}
    for key, value, default in (
        ("initialDelaySeconds", p.initial_delay_seconds, 0),
        ("periodSeconds", p.period_seconds, 10),
        ("timeoutSeconds", p.timeout_seconds, 1),
        ("successThreshold", p.success_threshold, 1),
        ("failureThreshold", p.failure_threshold, 3),
    ):
        if value != default:
            out[key] = value
    return out


def _status(status: WorkloadStatus, *, share: bool) -> Doc:
    out: Doc = {}
    if status.conditions:
        out["conditions"] = [_condition(c) for c in status.conditions]
    if status.admission is not None:
        out["admission"] = _admission(status.admission)
    if status.requeue_state is not None:
        rq: Doc = {"count": status.requeue_state.count}
        if status.requeue_state.requeue_at is not None:
            rq["requeueAt"] = format_rfc3339(status.requeue_state.requeue_at)
        out["requeueState"] = rq
    if status.reclaimable_pods:
        out["reclaimablePods"] = [{"name": name, "count": count} for name, count in status.reclaimable_pods.items()]
    if status.accumulated_past_execution_time_seconds:
        out[ACCUMULATED_V1BETA2] = status.accumulated_past_execution_time_seconds
    extra: Doc = dict(status.extra) if share else copy.deepcopy(dict(status.extra))
    if status.pods:
        extra["pods"] = [p.to_json() for p in status.pods]
    if status.last_pods:
        extra["lastPods"] = [p.to_json() for p in status.last_pods]
    if status.deleting:
        extra["deleting"] = True
    if status.terminate is not None:
        extra["terminate"] = {"reason": status.terminate[0], "message": status.terminate[1]}
    if extra:
        out["extra"] = extra
    return out


def _condition(c: Condition) -> Doc:
    return {
        "type": c.type,
        "status": c.status,
        "reason": c.reason,
        "message": c.message,
        "lastTransitionTime": format_rfc3339(c.last_transition_time),
    }


def _admission(adm: Admission) -> Doc:
    assignments: list[Doc] = []
    for psa in adm.pod_set_assignments:
        doc: Doc = {
            "name": psa.name,
            "flavors": dict(psa.flavors),
            "resourceUsage": _quantities(psa.resource_usage),
            "count": psa.count,
        }
        if psa.topology_assignment is not None:
            doc["topologyAssignment"] = topology_assignment_doc(psa.topology_assignment)
        assignments.append(doc)
    return {"clusterQueue": adm.cluster_queue, "podSetAssignments": assignments}


# -- configuration -------------------------------------------------------------


def _configuration(cfg: ControllerConfig) -> Doc:
    doc: Doc = {"apiVersion": SLUICEGATE_V1BETA2, "kind": "Configuration"}
    if cfg.fair_sharing != FairSharingConfig():
        doc["fairSharing"] = {
            "enable": cfg.fair_sharing.enabled,
            "preemptionStrategies": [s.value for s in cfg.fair_sharing.preemption_strategies],
        }
    if cfg.wait_for_pods_ready != WaitForPodsReadyConfig():
        doc["waitForPodsReady"] = _wait_for_pods_ready(cfg.wait_for_pods_ready)
    if cfg.label_keys_to_copy:
        doc["integrations"] = {"labelKeysToCopy": list(cfg.label_keys_to_copy)}
    afs = cfg.admission_fair_sharing
    if afs is not None:
        section: Doc = {
            "usageHalfLifeTime": format_duration(afs.usage_half_life_seconds),
            "usageSamplingInterval": format_duration(afs.usage_sampling_interval_seconds),
        }
        if afs.resource_weights:
            section["resourceWeights"] = {res: w for res, w in sorted(afs.resource_weights.items())}
        doc["admissionFairSharing"] = section
    return doc


def _seconds(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def _wait_for_pods_ready(w: WaitForPodsReadyConfig) -> Doc:
    out: Doc = {"enable": w.enabled, "timeout": format_duration(w.timeout_seconds), "blockAdmission": w.block_admission}
    if w.recovery_timeout_seconds is not None:
        out["recoveryTimeout"] = format_duration(w.recovery_timeout_seconds)
    strategy: Doc = {
        "timestamp": w.requeuing_timestamp.value,
        "backoffBaseSeconds": _seconds(w.backoff_base_seconds),
        "backoffMaxSeconds": _seconds(w.backoff_max_seconds),
    }
    if w.backoff_limit_count is not None:
        strategy["backoffLimitCount"] = w.backoff_limit_count
    out["requeuingStrategy"] = strategy
    return out
