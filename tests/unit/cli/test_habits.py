"""kubectl's habits in sluicectl, against a served controller: flags anywhere, -n/-A, -o, -l, errors."""

from __future__ import annotations

import json

import pytest
import yaml

from sluicegate.controller.manager import Manager
from sluicegate.manifest.loader import parse_text
from tests.builders import container_doc, workload_doc
from tests.unit.controller.served import Served

from .conftest import ctl, ctl_offline

TEAM_B = """
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team-b}
spec: {clusterQueue: cq}
"""


def submit(m: Manager, name: str, *, ns: str = "default", labels: dict[str, str] | None = None,
           priority: int | None = None, queue: str = "lq") -> None:
    body = workload_doc(name, container_doc(name="c", requests={"cpu": "1"}), ns=ns, labels=labels,
                        priority=priority, queue=queue)
    m.create_workload(parse_text(json.dumps(body), name, fmt="json")[0])


@pytest.fixture
async def three(served: Served) -> Served:
    served.manager.apply(parse_text(TEAM_B, "team-b.yaml"))
    submit(served.manager, "alpha", labels={"team": "a", "tier": "gold"})
    submit(served.manager, "beta", labels={"team": "b"})
    submit(served.manager, "gamma", ns="team-b", labels={"team": "a"})
    return served


@pytest.mark.parametrize(
    "argv",
    [
        ["get", "workloads", "-o", "json", "alpha"],
        ["get", "workloads", "alpha", "-o", "json"],
        ["get", "-o", "json", "workloads", "alpha"],
        ["get", "workloads", "-n", "default", "alpha", "-o", "json"],
        ["-n", "default", "get", "workloads", "alpha", "-o", "json"],
        ["get", "wl", "--namespace=default", "-ojson", "alpha"],
    ],
    ids=["flags-before-name", "flags-after", "flags-before-kind", "namespace-between", "namespace-before-verb",
         "glued-values"],
)
async def test_flags_anywhere(three: Served, argv: list[str]) -> None:
    r = await ctl(three, *argv)
    assert (r.code, r.err) == (0, "")
    assert json.loads(r.out)["metadata"]["name"] == "alpha"


async def test_namespace_and_all_namespaces(three: Served) -> None:
    r = await ctl(three, "get", "workloads", "-n", "team-b", "-o", "name")
    assert r.out.split() == ["workload/gamma"]
    r = await ctl(three, "get", "workloads", "-A", "-o", "name")
    assert sorted(r.out.split()) == ["workload/alpha", "workload/beta", "workload/gamma"]
    r = await ctl(three, "get", "workloads", "-o", "name")
    assert sorted(r.out.split()) == ["workload/alpha", "workload/beta"]
    r = await ctl(three, "-n", "team-b", "get", "workloads", "gamma", "-o", "yaml")
    assert yaml.safe_load(r.out)["metadata"]["namespace"] == "team-b"


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("team=a", ["alpha", "gamma"]),
        ("team==a,tier=gold", ["alpha"]),
        ("team!=a", ["beta"]),
        ("team in (a,b)", ["alpha", "beta", "gamma"]),
        ("team notin (a)", ["beta"]),
        ("tier", ["alpha"]),
        ("!tier", ["beta", "gamma"]),
    ],
)
async def test_label_selectors(three: Served, selector: str, expected: list[str]) -> None:
    r = await ctl(three, "get", "workloads", "-A", "-l", selector, "-o", "name")
    assert (r.code, r.err) == (0, "")
    assert sorted(r.out.split()) == [f"workload/{n}" for n in expected]


async def test_a_bad_selector_is_refused_naming_it(three: Served) -> None:
    r = await ctl(three, "get", "workloads", "-l", "team in a,b")
    assert r.code == 1
    assert r.err.startswith("error: label_selector: ") and r.err.count("\n") == 1


async def test_output_formats(three: Served) -> None:
    r = await ctl(three, "get", "workloads", "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}/"
                  "{.metadata.name}{\"\\n\"}{end}")
    assert sorted(r.out.split()) == ["default/alpha", "default/beta", "team-b/gamma"]
    r = await ctl(three, "get", "workloads", "alpha", "-o", "jsonpath={.metadata.labels.team} {.spec.queueName}")
    assert r.out == "a lq\n"
    r = await ctl(three, "get", "workloads", "-o", "wide")
    header = r.out.splitlines()[0].split()
    assert header[:2] == ["NAMESPACE", "NAME"] and header[-3:] == ["PODS", "NODES", "REASON"]
    r = await ctl(three, "get", "workloads", "-o", "yaml")
    doc = yaml.safe_load(r.out)
    assert doc["kind"] == "List" and len(doc["items"]) == 2
    r = await ctl(three, "get", "clusterqueues", "-o", "wide")
    assert "STOP POLICY" in r.out.splitlines()[0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["get"], "error: the following arguments are required: kind"),
        (["get", "wl", "-o", "bogus"], "error: argument -o/--output: unknown output format 'bogus'"),
        (["get", "wl", "--bogus"], "error: unrecognized arguments: --bogus"),
        (["get", "wl", "-o", "jsonpath={.a"], "error: argument -o/--output: -o jsonpath: unclosed '{'"),
        (["frobnicate"], "error: argument COMMAND: invalid choice: 'frobnicate'"),
        (["completion", "fish"], "error: argument shell: invalid choice: 'fish'"),
    ],
    ids=["missing-kind", "bad-output", "unknown-flag", "bad-template", "unknown-verb", "unknown-shell"],
)
def test_usage_errors_are_one_line_and_exit_2(argv: list[str], message: str) -> None:
    r = ctl_offline(*argv)
    assert r.code == 2
    assert r.out == ""
    assert r.err.startswith(message), r.err
    assert r.err.count("\n") == 1, r.err


def test_version_text(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.metadata

    from sluicegate.cli.main import main

    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out == f"sluicectl {importlib.metadata.version('sluicegate')}\n"


def test_completion_prints_the_shell_script() -> None:
    bash = ctl_offline("completion", "bash")
    assert bash.code == 0 and "complete " in bash.out and "sluicectl" in bash.out
    zsh = ctl_offline("completion", "zsh")
    assert zsh.code == 0 and "#compdef sluicectl" in zsh.out
