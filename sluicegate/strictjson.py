"""JSON read as manifests are, and written compactly: shared by the manifest codec and the client library.

A manifest's JSON may not repeat a key (Kubernetes' API server refuses it;
Python's json would keep the last) nor hold NaN or Infinity (which JSON does
not have).  The client library reads a Workload document with this decoder
before it sends it as a typed creation item, so what the server would refuse
in the document is refused in the item too.  Kept apart from
``sluicegate.manifest``, whose package imports the whole codec.
"""

from __future__ import annotations

import json
from collections.abc import Callable

__all__ = ["DECODER", "compact_encoder"]


def _reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out = dict(pairs)
    if len(out) == len(pairs):
        # The common case stays in C: only a document that really repeats a
        # key pays for finding which one.
        return out
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ValueError(f"found the key {key!r} twice; each field may appear only once")
        seen.add(key)
    raise AssertionError("unreachable: a shorter dict means a repeated key")


def _reject_non_json_constant(name: str) -> object:
    # Python's json reads NaN and Infinity, which JSON itself does not have.
    raise ValueError(f"{name} is not a JSON value")


# Built once: json.loads with options builds a new decoder for every call.
DECODER = json.JSONDecoder(object_pairs_hook=_reject_duplicate_keys, parse_constant=_reject_non_json_constant)


def compact_encoder() -> Callable[[object], str]:
    """``json.JSONEncoder(separators=(",", ":")).encode``, the same text, without its per-call set-up.

    ``encode`` builds a new C encoder (and a dict to detect cycles) at every call, and most calls here
    encode a small value; this makes the C encoder once, with the very arguments ``encode`` passes it
    (no cycle detection: the values encoded hold no cycles).  Where the C accelerator is missing, ``encode``.
    """
    base = json.JSONEncoder(separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return base.encode
    encoder = make(None, base.default, json.encoder.encode_basestring_ascii, None, base.key_separator,
                   base.item_separator, base.sort_keys, base.skipkeys, base.allow_nan)
    join = "".join

    def to_json(value: object) -> str:
        return join(encoder(value, 0))

    return to_json
