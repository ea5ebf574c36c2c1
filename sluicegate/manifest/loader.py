"""Reading manifest files into raw documents.

Files are YAML (``*.yaml``, ``*.yml``, several documents separated by
``---``) or JSON (``*.json``).  A directory contributes its manifest files in
name order, not recursing, as ``kubectl apply -f DIR`` does.  Empty
documents are skipped; a ``kind: List`` (what ``kubectl get -o yaml`` prints)
contributes its items.

The YAML reader differs from a plain ``yaml.safe_load`` in two ways, both to
match what the Kubernetes API server would accept:

* timestamps stay strings (``creationTimestamp: 2024-05-01T12:00:00Z``), so
  the decoder sees the text a person wrote;
* a key repeated in one mapping is an error instead of "last one wins".
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import yaml  # type: ignore[import-untyped, unused-ignore]

from sluicegate.manifest.errors import FieldError, ManifestError
from sluicegate.manifest.syntax import show
from sluicegate.strictjson import DECODER

__all__ = ["RawDocument", "load_documents", "parse_json_part", "parse_text", "MANIFEST_SUFFIXES"]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True, slots=True)
class RawDocument:
    """One parsed document, not yet validated.

    ``source`` is ``file.yaml#N`` where N counts the documents of the file
    from 1 (``file.yaml#N.items[i]`` for an item of a List); ``line`` is the
    1-based line where the document starts.
    """

    source: str
    body: dict[str, object]
    line: int = 1


_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _ManifestLoader(_BaseLoader):  # type: ignore[misc, valid-type, unused-ignore]
    """Safe YAML loading with Kubernetes' expectations (see module docstring)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            # Keys brought in by a merge (<<: *base) may legitimately be
            # overridden; only keys written twice in the same mapping clash.
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"found the key {key!r} twice; each field may appear only once",
                    key_node.start_mark,
                )
            seen.add(key)
        result: dict[object, object] = super().construct_mapping(node, deep=deep)
        return result


_ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP_TAG]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}


def load_documents(paths: Sequence[str]) -> list[RawDocument]:
    """Read every document of the given files and directories, in order.

    Raises :class:`ManifestError` for the first file that cannot be read or
    parsed, naming the file and, where the parser knows it, the line.
    """
    docs: list[RawDocument] = []
    for path in paths:
        for file in _expand(path):
            docs.extend(_load_file(file))
    return docs


def _expand(path: str) -> list[str]:
    if os.path.isdir(path):
        try:
            names = sorted(os.listdir(path))
        except OSError as exc:
            raise ManifestError(path, [FieldError("", f"cannot list directory: {exc.strerror}")]) from None
        return [
            os.path.join(path, name)
            for name in names
            if name.endswith(MANIFEST_SUFFIXES) and os.path.isfile(os.path.join(path, name))
        ]
    return [path]


def _load_file(path: str) -> list[RawDocument]:
    if path == "-":
        # kubectl's -f -: the documents come on standard input (YAML, which JSON is too).
        try:
            return parse_text(sys.stdin.read(), "<stdin>")
        except UnicodeDecodeError as exc:
            raise ManifestError("<stdin>", [FieldError("", f"is not UTF-8 text ({exc.reason})")]) from None
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise ManifestError(path, [FieldError("", "no such file or directory")]) from None
    except UnicodeDecodeError as exc:
        raise ManifestError(path, [FieldError("", f"is not UTF-8 text ({exc.reason} at byte {exc.start})")]) from None
    except OSError as exc:
        raise ManifestError(path, [FieldError("", f"cannot read file: {exc.strerror}")]) from None
    return parse_text(text, path, fmt="json" if path.endswith(".json") else "yaml")


def parse_text(text: str, source: str, *, fmt: Literal["yaml", "json"] = "yaml") -> list[RawDocument]:
    """Parse manifest text; ``source`` names it in documents and errors (a file name, ``<stdin>``)."""
    if fmt == "json":
        return _parse_json(text, source)
    return _parse_yaml(text, source)


def _parse_yaml(text: str, source: str) -> list[RawDocument]:
    docs: list[RawDocument] = []
    loader = _ManifestLoader(text)
    try:
        number = 0
        while loader.check_node():
            node = loader.get_node()
            number += 1
            line = node.start_mark.line + 1
            data = loader.construct_document(node)
            docs.extend(_documents_of(data, f"{source}#{number}", line))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        detail = exc.problem or "malformed YAML"
        if exc.context:
            detail = f"{detail} ({exc.context})"
        raise ManifestError(
            source,
            [FieldError("", f"could not parse YAML: {detail}")],
            line=mark.line + 1 if mark is not None else None,
        ) from None
    except yaml.YAMLError as exc:
        raise ManifestError(source, [FieldError("", f"could not parse YAML: {exc}")]) from None
    finally:
        loader.dispose()
    return docs


# The decoder of JSON manifests (a repeated key or NaN is an error), shared with the client library.
_JSON_DECODER = DECODER


def _parse_json(text: str, source: str) -> list[RawDocument]:
    if not text.strip():
        return []
    try:
        data = _JSON_DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(source, [FieldError("", f"could not parse JSON: {exc.msg}")], line=exc.lineno) from None
    except RecursionError:
        raise ManifestError(
            source, [FieldError("", f"could not parse JSON: nested deeper than {MAX_DEPTH} levels")]
        ) from None
    except ValueError as exc:
        raise ManifestError(source, [FieldError("", f"could not parse JSON: {exc}")]) from None
    return _documents_of(data, f"{source}#1", 1, bounded=_within_bounds(text))


def parse_json_part(text: str, source: str, path: str) -> object:
    """One field's value given as JSON text on its own (a typed creation's spec), read as a JSON
    document's would be: a repeated key, NaN, or a tree beyond the bounds is an error naming ``path``."""
    try:
        data = _JSON_DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(source, [FieldError(path, f"could not parse JSON: {exc.msg}")]) from None
    except RecursionError:
        raise ManifestError(
            source, [FieldError(path, f"could not parse JSON: nested deeper than {MAX_DEPTH} levels")]
        ) from None
    except ValueError as exc:
        raise ManifestError(source, [FieldError(path, f"could not parse JSON: {exc}")]) from None
    if not _within_bounds(text):
        try:
            _measure(data, path, 1, {}, set())
        except _TreeProblem as exc:
            raise ManifestError(source, [FieldError(exc.path, exc.message)]) from None
    return data


def _within_bounds(text: str) -> bool:
    """Whether JSON text is sure to parse into a tree ``_measure`` accepts, without walking it.

    JSON has no aliases, so the tree has at most as many values and
    characters as the text; it nests no deeper than its count of opening
    brackets; and a lone surrogate comes either from the text itself (which
    then does not encode) or from a ``\\uD800``-style escape.  Counting in C
    costs far less than the walk; text that fails a test is simply measured.
    """
    return (
        len(text) <= min(MAX_CHARS, MAX_NODES)
        and _encodable(text)
        and text.count("{") + text.count("[") <= MAX_DEPTH
        and "\\ud" not in text
        and "\\uD" not in text
    )


def _documents_of(data: object, source: str, line: int, *, bounded: bool = False) -> list[RawDocument]:
    """The documents of one parsed text; ``bounded``: the text already showed the tree is within the limits."""
    if data is None:
        return []
    if not bounded:
        try:
            _measure(data, "", 1, {}, set())
        except _TreeProblem as exc:
            raise ManifestError(source, [FieldError(exc.path, exc.message)], line=line) from None
    if not isinstance(data, dict):
        raise ManifestError(
            source,
            [FieldError("", f"a document must be a mapping with apiVersion and kind, got {show(data)}")],
            line=line,
        )
    if data.get("kind") == "List" and data.get("apiVersion") == "v1":
        return _list_items(data, source, line)
    return [RawDocument(source=source, body=data, line=line)]


def _list_items(data: dict[object, object], source: str, line: int) -> list[RawDocument]:
    # A List's own metadata only carries paging state (resourceVersion,
    # continue) from the server that printed it; it says nothing about the
    # objects, so it is accepted and not read.
    extra = sorted(str(k) for k in data if k not in ("apiVersion", "kind", "items", "metadata"))
    if extra:
        raise ManifestError(
            source, [FieldError(extra[0], "unknown field; a List holds only items")], kind="List", line=line
        )
    items = data.get("items") or []
    if not isinstance(items, list):
        raise ManifestError(source, [FieldError("items", f"must be a list, got {show(items)}")], kind="List", line=line)
    docs: list[RawDocument] = []
    for i, item in enumerate(items):
        item_source = f"{source}.items[{i}]"
        if not isinstance(item, dict):
            raise ManifestError(
                item_source, [FieldError("", f"a List item must be a mapping, got {show(item)}")], line=line
            )
        docs.append(RawDocument(source=item_source, body=item, line=line))
    return docs


# Bounds on a parsed document, whatever its text: no Kubernetes object nests
# this deep, and YAML aliases must not expand a small text into a huge tree
# ("billion laughs") or into one that contains itself.
MAX_DEPTH = 100
MAX_NODES = 4_000_000
MAX_CHARS = 64 * 1024 * 1024


class _TreeProblem(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path.encode("utf-8", "backslashreplace").decode("utf-8")
        self.message = message


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _measure(
    value: object, path: str, depth: int, memo: dict[int, tuple[int, int]], on_path: set[int]
) -> tuple[int, int]:
    """(nodes, characters) of the tree as expanded; raises _TreeProblem for a tree no manifest may be.

    Shared subtrees (YAML aliases) are measured once (``memo``), so this is
    linear in the text even when the expansion would not be.  A string must
    be Unicode text UTF-8 can encode: a lone surrogate (JSON "\\ud800") can
    be neither stored nor sent on.
    """
    if isinstance(value, str):
        if not _encodable(value):
            raise _TreeProblem(path, "contains a lone surrogate code point, which is not valid Unicode text")
        return 1, len(value)
    if not isinstance(value, (dict, list)):
        return 1, 0
    key = id(value)
    done = memo.get(key)
    if done is not None:
        return done
    if key in on_path:
        raise _TreeProblem(path, "contains itself (a recursive YAML alias)")
    if depth > MAX_DEPTH:
        raise _TreeProblem(path, f"nested deeper than {MAX_DEPTH} levels")
    on_path.add(key)
    nodes, chars = 1, 0
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for k, item in items:
        if isinstance(value, dict):
            name = k if isinstance(k, str) else str(k)
            sub = f"{path}.{name}" if path else name
            if not _encodable(name):
                raise _TreeProblem(sub, "the key contains a lone surrogate code point, which is not valid Unicode text")
            chars += len(name)
        else:
            sub = f"{path}[{k}]"
        n, c = _measure(item, sub, depth + 1, memo, on_path)
        nodes, chars = nodes + n, chars + c
        if nodes > MAX_NODES or chars > MAX_CHARS:
            raise _TreeProblem(
                path,
                f"too large once YAML aliases are expanded (more than {MAX_NODES} values or {MAX_CHARS} characters)",
            )
    on_path.discard(key)
    memo[key] = (nodes, chars)
    return nodes, chars
