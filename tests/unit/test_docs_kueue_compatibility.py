"""docs/kueue-compatibility.md names every field the manifest decoders know, accept or refuse, and every kind.

The field names are read from the decoders' source: every string in a
``known=`` or ``unsupported=`` argument, in a local ``known``/``unsupported``
list, and in the module-level tables they use (``*_FIELDS``,
``*_UNSUPPORTED``, ``*_SECTIONS``). A field added to a decoder without a line
on the page fails here, naming it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from sluicegate.manifest.dialect import KINDS_BY_API_VERSION

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "kueue-compatibility.md"
DECODERS = sorted((ROOT / "sluicegate" / "manifest").glob("decode*.py")) + [ROOT / "sluicegate/manifest/dialect.py"]
TABLE_NAME = re.compile(r"^_?[A-Z0-9_]*(_FIELDS|_UNSUPPORTED|_SECTIONS)$")
FIELD_NAME = re.compile(r"^[a-z][A-Za-z0-9]*$")


def _strings(node: ast.AST) -> set[str]:
    """String literals of a tuple/list/set, or the keys of a dict literal (names are resolved as tables)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {s for elt in node.elts for s in _strings(elt)}
    if isinstance(node, ast.Dict):
        return {s for key in node.keys if key is not None for s in _strings(key)}
    return set()


def decoder_fields() -> dict[str, set[str]]:
    """field name -> the decoder files that know it."""
    found: dict[str, set[str]] = {}
    for path in DECODERS:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            values: list[ast.AST] = []
            if isinstance(node, ast.keyword) and node.arg in ("known", "unsupported"):
                values.append(node.value)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = {t.id for t in targets if isinstance(t, ast.Name)}
                if node.value is not None and (names & {"known", "unsupported"} or any(map(TABLE_NAME.match, names))):
                    values.append(node.value)
            for value in values:
                # Field names only: not the kinds a table is keyed by, nor messages.
                for s in filter(FIELD_NAME.match, _strings(value)):
                    found.setdefault(s, set()).add(path.name)
    return found


def test_the_scan_finds_the_decoders_tables() -> None:
    fields = decoder_fields()
    # One from each kind of source: a module table, a literal argument, a local list, a dict's keys.
    assert {"initContainers", "minCount", "recoveryTimeout", "admissionChecks", "generateName", "leaderElection"} <= set(fields)


def test_every_decoder_field_is_on_the_page() -> None:
    text = DOC.read_text()
    # A field counts as listed when it appears as code: `name`, `spec.name`, `.name`, `...name`, `name[]`.
    listed = set(re.findall(r"[`./]([A-Za-z][A-Za-z0-9]*)(?=[`.\[ /(])", text))
    missing = sorted(f for f in decoder_fields() if f not in listed)
    assert missing == [], f"docs/kueue-compatibility.md does not list: {missing}"


def test_every_kind_is_on_the_page() -> None:
    text = DOC.read_text()
    kinds = {k for ks in KINDS_BY_API_VERSION.values() for k in ks} | {"Job"}
    refused = {"AdmissionCheck", "ProvisioningRequestConfig", "MultiKueueConfig", "MultiKueueCluster"}
    table = text[text.index("## Kinds"):text.index("## Object metadata")]
    rows = {m.split("|")[1].strip() for m in table.splitlines() if m.startswith("| ") and "---" not in m}
    named = {re.split(r"[ ,(]", r)[0] for r in rows} | {w for r in rows for w in re.findall(r"\w+", r)}
    assert (kinds | refused) - named == set()
    for kind in refused:
        assert re.search(rf"\| [^|]*{kind}[^|]* \| refused \|", table), kind
