"""Reading files and directories into raw documents; parse errors name file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluicegate.manifest import ManifestError, RawDocument, load_documents, parse_text


def _write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_multi_document_yaml_skips_empty_documents(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "queues.yaml",
        "a: 1\n---\n# only a comment\n---\n---\nb:\n  c: [1, 2]\n...\n",
    )
    assert load_documents([f]) == [
        RawDocument(source=f"{f}#1", body={"a": 1}, line=1),
        RawDocument(source=f"{f}#4", body={"b": {"c": [1, 2]}}, line=6),
    ]


def test_directory_reads_manifest_files_in_name_order_without_recursing(tmp_path: Path) -> None:
    _write(tmp_path / "b.yml", "name: b\n")
    _write(tmp_path / "a.yaml", "name: a\n")
    _write(tmp_path / "c.json", '{"name": "c"}')
    _write(tmp_path / "notes.txt", "name: ignored\n")
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "sub" / "d.yaml", "name: d\n")
    docs = load_documents([str(tmp_path)])
    assert [(Path(d.source).name, d.body) for d in docs] == [
        ("a.yaml#1", {"name": "a"}),
        ("b.yml#1", {"name": "b"}),
        ("c.json#1", {"name": "c"}),
    ]


def test_files_and_directories_keep_the_order_given(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    _write(tmp_path / "dir" / "x.yaml", "n: x\n")
    single = _write(tmp_path / "first.yaml", "n: first\n")
    docs = load_documents([single, str(tmp_path / "dir")])
    assert [d.body["n"] for d in docs] == ["first", "x"]


def test_timestamps_stay_strings() -> None:
    (doc,) = parse_text("metadata:\n  creationTimestamp: 2024-05-01T12:00:00Z\n", "w.yaml")
    assert doc.body == {"metadata": {"creationTimestamp": "2024-05-01T12:00:00Z"}}


def test_yaml_merge_keys_may_be_overridden() -> None:
    (doc,) = parse_text("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  x: 3\n", "m.yaml")
    assert doc.body == {"base": {"x": 1, "y": 2}, "d": {"x": 3, "y": 2}}


def test_kubectl_list_contributes_its_items() -> None:
    text = """
apiVersion: v1
kind: List
metadata:
  resourceVersion: ""
items:
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ResourceFlavor
  metadata: {name: a}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ResourceFlavor
  metadata: {name: b}
"""
    docs = parse_text(text, "dump.yaml")
    assert [(d.source, d.body["metadata"]) for d in docs] == [
        ("dump.yaml#1.items[0]", {"name": "a"}),
        ("dump.yaml#1.items[1]", {"name": "b"}),
    ]


@pytest.mark.parametrize(
    ("text", "fmt", "expected"),
    [
        pytest.param(
            "metadata:\n  name: a\n  name: b\n",
            "yaml",
            "bad.yaml (line 3): could not parse YAML: found the key 'name' twice; each field may appear only once "
            "(while reading a mapping)",
            id="yaml-duplicate-key",
        ),
        pytest.param(
            '{\n  "kind": "Namespace",\n  "metadata": {"name": "a",}\n}',
            "json",
            "bad.yaml (line 3): could not parse JSON: Expecting property name enclosed in double quotes",
            id="json-trailing-comma",
        ),
        pytest.param(
            '{"kind": "Namespace", "kind": "LocalQueue"}',
            "json",
            "bad.yaml: could not parse JSON: found the key 'kind' twice; each field may appear only once",
            id="json-duplicate-key",
        ),
        pytest.param(
            '{"kind": "Namespace", "metadata": {"name": "a", "labels": {"x": "1", "x": "2"}}}',
            "json",
            "bad.yaml: could not parse JSON: found the key 'x' twice; each field may appear only once",
            id="json-duplicate-nested-key",
        ),
        pytest.param(
            '{"kind": "Workload", "spec": {"priority": NaN}}',
            "json",
            "bad.yaml: could not parse JSON: NaN is not a JSON value",
            id="json-nan",
        ),
        pytest.param(
            "a: 1\n---\n- just\n- a list\n",
            "yaml",
            "bad.yaml#2 (line 3): a document must be a mapping with apiVersion and kind, got a list",
            id="document-not-a-mapping",
        ),
        pytest.param(
            "just text\n",
            "yaml",
            'bad.yaml#1 (line 1): a document must be a mapping with apiVersion and kind, got "just text"',
            id="document-a-scalar",
        ),
        pytest.param(
            "apiVersion: v1\nkind: List\nitems: [1]\n",
            "yaml",
            "bad.yaml#1.items[0] (line 1): a List item must be a mapping, got 1",
            id="list-item-not-a-mapping",
        ),
    ],
)
def test_parse_errors_name_the_file_and_line(text: str, fmt: str, expected: str) -> None:
    with pytest.raises(ManifestError) as info:
        parse_text(text, "bad.yaml", fmt=fmt)  # type: ignore[arg-type]
    assert str(info.value) == expected


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n  labels: {team: a\n", 6, id="unclosed-flow-mapping"),
        pytest.param("a: 1\nb: 2\n  c: 3\n", 3, id="bad-indentation"),
        pytest.param("a: 1\n---\nb: *nowhere\n", 3, id="undefined-alias"),
    ],
)
def test_yaml_syntax_errors_carry_file_and_line(text: str, line: int) -> None:
    # The wording after the prefix is the YAML parser's own.
    with pytest.raises(ManifestError) as info:
        parse_text(text, "bad.yaml")
    assert (info.value.source, info.value.line) == ("bad.yaml", line)
    assert str(info.value).startswith(f"bad.yaml (line {line}): could not parse YAML: ")


def test_parse_error_line_is_available_as_a_field(tmp_path: Path) -> None:
    f = _write(tmp_path / "x.yaml", "a: 1\n---\nb: [\n")
    with pytest.raises(ManifestError) as info:
        load_documents([f])
    assert (info.value.source, info.value.line) == (f, 4)


def test_missing_file(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    with pytest.raises(ManifestError) as info:
        load_documents([missing])
    assert str(info.value) == f"{missing}: no such file or directory"


def test_non_utf8_file(tmp_path: Path) -> None:
    f = tmp_path / "latin1.yaml"
    f.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(ManifestError) as info:
        load_documents([str(f)])
    assert str(info.value) == f"{f}: is not UTF-8 text (invalid continuation byte at byte 9)"


def test_empty_inputs_give_no_documents(tmp_path: Path) -> None:
    _write(tmp_path / "empty.yaml", "")
    _write(tmp_path / "empty.json", "  \n")
    assert load_documents([str(tmp_path)]) == []
