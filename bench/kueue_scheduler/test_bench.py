"""Checks of the bench's own arithmetic (config expansion, ideal bound, Kueue's summary maths).

Not part of the suite (tests/ is); run explicitly:

    .venv/bin/pytest bench/kueue_scheduler/test_bench.py
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.kueue_scheduler import fakenode  # noqa: E402
from bench.kueue_scheduler.config import (  # noqa: E402
    ConfigError,
    expand,
    ideal_bound,
    load_config,
    parse_config,
    scaled,
    without_tas,
)
from bench.kueue_scheduler.generator import CreationStats, queue_documents, workload_document  # noqa: E402
from bench.kueue_scheduler.recorder import Observation, Recorder  # noqa: E402
from bench.kueue_scheduler.run import RunResult, _wait_exit, phases  # noqa: E402
from bench.kueue_scheduler.run import main as run_bench  # noqa: E402
from bench.kueue_scheduler.watcher import observation  # noqa: E402

HERE = Path(__file__).resolve().parent


def one_queue(*, count: int = 1, runtime_ms: int = 1000, request: object = 1) -> dict[str, object]:
    return {"cohorts": [{"className": "cohort", "count": 1, "queuesSets": [{
        "className": "cq", "count": 1, "nominalQuota": 20, "borrowingLimit": 100,
        "reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority",
        "workloadsSets": [{"count": count, "creationIntervalMs": 100, "workloads": [
            {"className": "small", "runtimeMs": runtime_ms, "priority": 50, "request": request}]}],
    }]}]}


@pytest.mark.parametrize(
    ("name", "queues", "workloads", "ideal_s", "work_s", "creation_s"),
    [
        # 6 CQs x (350x1x0.2 + 100x5x0.5 + 50x20x1) = 7,920 CPU-s on 120 CPUs; last large at 60 s + 1 s.
        ("baseline", 30, 15_000, 66.0, 66.0, 61.0),
        # 100 CQs x (35x1x0.15 + 11x5x0.35 + 4x20x0.7) = 8,050 CPU-s on 2,000 CPUs; last medium at 3.3 s + 0.35 s.
        ("large-scale", 1_000, 50_000, 4.025, 4.025, 3.65),
        # Per pod x pods: 6 CQs x (350x(2x0.5)x0.2 + 100x(4x1.25)x0.5 + 50x(8x2.5)x1) = 7,920 CPU-s on 120 CPUs,
        # as the baseline; every set starts at 0, so the last large is created at 17 x 1.2 = 20.4 s (+1 s).
        ("tas", 30, 15_000, 66.0, 66.0, 21.4),
    ],
    ids=["baseline", "large-scale", "tas"],
)
def test_shipped_configs_expand_like_kueue(name: str, queues: int, workloads: int, ideal_s: float, work_s: float,
                                           creation_s: float) -> None:
    plan = expand(load_config(HERE / "configs" / name / "generator.yaml"))
    bound = ideal_bound(plan)
    assert (len(plan.queues), len(plan.workloads)) == (queues, workloads)
    assert (round(bound.wall_s, 3), round(bound.work_s, 3), round(bound.creation_s, 3)) == (ideal_s, work_s, creation_s)
    assert plan.queues[0].name == "cq-0-0-cohort-0"
    first = "small-balanced-rack-2-0-0" if name == "tas" else "small-0-0-0"  # three sets due at 0.1 s: by name
    assert (plan.workloads[0].namespace, plan.workloads[0].name, plan.workloads[0].due) == ("cq-0-0-cohort-0", first, 0.06 if name == "large-scale" else 0.1)


RACK = "cloud.provider.com/topology-rack"
BLOCK = "cloud.provider.com/topology-block"
HOSTNAME = "kubernetes.io/hostname"


def test_tas_config_is_kueues_file() -> None:
    """Kueue's test/performance/scheduler/configs/tas/generator.yaml: 9 classes, 2/4/8 pods of 500m/1250m/2500m,
    rack-level required/preferred/balanced (slice sizes 1/2/4), 1 block x 10 racks x 64 nodes of 96 CPUs."""
    plan = expand(load_config(HERE / "configs" / "tas" / "generator.yaml"))
    per_class: dict[str, tuple[int, int, int, str | None, int | None, int]] = {}
    for w in plan.workloads:
        n = per_class.get(w.class_name, (w.pod_count, w.request_m, w.priority, w.tas_constraint, w.slice_size, 0))[-1]
        per_class[w.class_name] = (w.pod_count, w.request_m, w.priority, w.tas_constraint, w.slice_size, n + 1)
        assert w.tas_level == RACK
    assert per_class == {
        "small-required-rack": (2, 500, 50, "required", None, 3600),
        "small-preferred-rack": (2, 500, 50, "preferred", None, 3600),
        "small-balanced-rack": (2, 500, 50, "balanced", 1, 3300),
        "medium-required-rack": (4, 1250, 100, "required", None, 1020),
        "medium-preferred-rack": (4, 1250, 100, "preferred", None, 990),
        "medium-balanced-rack": (4, 1250, 100, "balanced", 2, 990),
        "large-required-rack": (8, 2500, 200, "required", None, 510),
        "large-preferred-rack": (8, 2500, 200, "preferred", None, 510),
        "large-balanced-rack": (8, 2500, 200, "balanced", 4, 480),
    }
    nodes = plan.nodes
    assert len(nodes) == 640 and len({n.name for n in nodes}) == 640
    assert {(n.cpu_m, n.memory) for n in nodes} == {(96_000, 256 << 30)}
    racks = {n.labels[RACK] for n in nodes}
    assert racks == {f"rack-{i}" for i in range(10)}
    assert all(sum(1 for n in nodes if n.labels[RACK] == r) == 64 for r in racks)
    assert nodes[64 * 2 + 15].name == "node-b0-r2-n15"
    assert dict(nodes[64 * 2 + 15].labels) == {"tas-node-group": "tas", BLOCK: "block-0", RACK: "rack-2",
                                               HOSTNAME: "node-b0-r2-n15"}


def test_tas_documents_carry_kueues_api() -> None:
    plan = expand(load_config(HERE / "configs" / "tas" / "generator.yaml"))
    docs = queue_documents(plan)
    assert docs[0] == {"apiVersion": "sluicegate.io/v1beta2", "kind": "Topology",
                       "metadata": {"name": "default-topology", "labels": {"kueue.x-k8s.io/performance-scheduler-cleanup": "true"}},
                       "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]}}
    assert docs[1]["kind"] == "ResourceFlavor" and docs[1]["spec"] == {"nodeLabels": {"tas-node-group": "tas"},
                                                                       "topologyName": "default-topology"}
    cq = next(d for d in docs if d["kind"] == "ClusterQueue")
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["name"] == "tas-flavor"  # type: ignore[index]
    by_class = {w.class_name: json.loads(workload_document(w)) for w in plan.workloads}
    annotations = {c: d["spec"]["podSets"][0]["template"]["metadata"]["annotations"] for c, d in by_class.items()}
    assert annotations["large-required-rack"] == {"kueue.x-k8s.io/podset-required-topology": RACK}
    assert annotations["medium-preferred-rack"] == {"kueue.x-k8s.io/podset-preferred-topology": RACK}
    assert annotations["large-balanced-rack"] == {"kueue.x-k8s.io/podset-slice-required-topology": RACK,
                                                  "kueue.x-k8s.io/podset-slice-size": "4"}
    pod_set = by_class["large-balanced-rack"]["spec"]["podSets"][0]
    assert (pod_set["count"], pod_set["template"]["spec"]["containers"][0]["resources"]["requests"]) == (8, {"cpu": "2500m"})


def test_without_tas_keeps_load_and_nodes_but_no_constraints() -> None:
    cfg = load_config(HERE / "configs" / "tas" / "generator.yaml")
    plain = expand(without_tas(cfg))
    docs = queue_documents(plain)
    assert [d["kind"] for d in docs[:1]] == ["ResourceFlavor"] and docs[0]["spec"] == {"nodeLabels": {"tas-node-group": "tas"}}
    assert all("metadata" not in json.loads(workload_document(w))["spec"]["podSets"][0]["template"] for w in plain.workloads)
    assert len(plain.nodes) == 640 and ideal_bound(plain).wall_s == ideal_bound(expand(cfg)).wall_s


def tas_file(**template: object) -> dict[str, object]:
    raw = one_queue()
    raw["topology"] = {"name": "t", "levels": [{"name": "rack", "count": 2, "nodeLabel": RACK},
                                              {"name": "node", "count": 2, "nodeLabel": HOSTNAME}]}
    raw["resourceFlavor"] = {"name": "f", "nodeLabel": "g", "topologyName": "t"}
    raw["cohorts"][0]["queuesSets"][0]["workloadsSets"][0]["workloads"][0].update(template)  # type: ignore[index]
    return raw


TK = "cohorts[0].queuesSets[0].workloadsSets[0].workloads[0]"


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"cohorts": [{"className": "c", "count": 1, "queuesSets": [], "lendingLimit": 1}]}, "cohorts[0].lendingLimit"),
        (one_queue(request="lots"), "cohorts[0].queuesSets[0].workloadsSets[0].workloads[0].request"),
        (one_queue(count=-1), "cohorts[0].queuesSets[0].workloadsSets[0].count"),
        ({}, "$.cohorts"),
        (tas_file(podCount=2, tasConstraint="required", tasLevel=BLOCK), f"{TK}.tasLevel"),
        (tas_file(podCount=2, tasConstraint="balanced", tasLevel=RACK), f"{TK}.sliceSize"),
        (tas_file(podCount=2, tasConstraint="balanced", tasLevel=RACK, sliceSize=3), f"{TK}.sliceSize"),
        (tas_file(podCount=6, tasConstraint="balanced", tasLevel=RACK, sliceSize=4), f"{TK}.sliceSize"),
        (tas_file(podCount=2, tasConstraint="spread", tasLevel=RACK), f"{TK}.tasConstraint"),
        (tas_file(podCount=2, tasConstraint="required"), f"{TK}.tasLevel"),
        (one_queue() | {"resourceFlavor": {"name": "f", "nodeLabel": "g", "topologyName": "t"}}, "resourceFlavor.topologyName"),
        ({**tas_file(), "resourceFlavor": {"name": "f", "topologyName": "t"}}, "resourceFlavor.nodeLabel"),
    ],
    ids=["unknown-field", "bad-quantity", "negative-count", "no-cohorts", "level-not-in-topology", "balanced-without-slice",
         "slice-larger-than-pods", "slice-not-dividing-pods", "unknown-constraint", "constraint-without-level", "flavor-names-missing-topology",
         "tas-flavor-without-node-label"],
)
def test_bad_config_names_the_field(raw: object, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(raw, source="test.yaml")
    assert err.value.key == key


def test_scaling_divides_counts_and_multiplies_times() -> None:
    cfg = scaled(parse_config(one_queue(count=350, runtime_ms=200), source="t"), count_scale=0.1, time_scale=0.5)
    plan = expand(cfg)
    assert [(w.name, w.due, w.runtime_ms) for w in plan.workloads[:2]] == [("small-0-0-0", 0.05, 100), ("small-0-1-0", 0.1, 100)]
    assert len(plan.workloads) == 35


def ob(name: str, *, reserved: bool = False, admitted: bool = False, evicted: bool = False, finished: bool = False) -> Observation:
    return Observation(namespace="cq-0-0-cohort-0", name=name, quota_reserved=reserved, admitted=admitted, evicted=evicted,
                       finished=finished)


ADMIT = {"reserved": True, "admitted": True}


@pytest.mark.parametrize(
    ("events", "cq", "small"),
    [
        (
            # Created at 0, admitted at 1, finished at 3: 1 CPU for 2 s of a 3 s window on 20 CPUs.
            [(0.0, ob("small-0-0-0")), (1.0, ob("small-0-0-0", **ADMIT)), (3.0, ob("small-0-0-0", **ADMIT, finished=True))],
            {"cpuUsed": 2_000_000, "cpuAverageUsage": 666, "nominalQuota": 20_000, "usagePercent": 3.33, "maxUsage": 1000,
             "cpuUsedByEvictedRuns": 0, "usefulUsagePercent": 3.33},
            {"count": 1, "totalEvictions": 0, "averageTimeToAdmissionMs": 1000, "averageTimeToFinishMs": 3000, "finished": 1},
        ),
        (
            # Evicted at 2 but holding quota until its pod exits at 2.5; admitted again at 4 (Kueue keeps the
            # last admission), finished at 5.  Quota held 1-2.5 (by a run that was evicted) and 4-5.
            [(0.0, ob("small-0-0-0")), (1.0, ob("small-0-0-0", **ADMIT)), (2.0, ob("small-0-0-0", **ADMIT, evicted=True)),
             (2.5, ob("small-0-0-0", evicted=True)), (4.0, ob("small-0-0-0", **ADMIT)),
             (5.0, ob("small-0-0-0", **ADMIT, finished=True))],
            {"cpuUsed": 2_500_000, "cpuAverageUsage": 500, "nominalQuota": 20_000, "usagePercent": 2.5, "maxUsage": 1000,
             "cpuUsedByEvictedRuns": 1_500_000, "usefulUsagePercent": 1.0},
            {"count": 1, "totalEvictions": 1, "averageTimeToAdmissionMs": 4000, "averageTimeToFinishMs": 5000, "finished": 1},
        ),
        (
            # One workload finished, one never admitted: Kueue averages over both (0 for the second).
            [(0.0, ob("small-0-0-0")), (0.0, ob("small-0-1-0")), (2.0, ob("small-0-0-0", **ADMIT)),
             (4.0, ob("small-0-0-0", **ADMIT, finished=True)), (4.0, ob("unknown"))],
            {"cpuUsed": 2_000_000, "cpuAverageUsage": 500, "nominalQuota": 20_000, "usagePercent": 2.5, "maxUsage": 1000},
            {"count": 2, "totalEvictions": 0, "averageTimeToAdmissionMs": 1000, "averageTimeToFinishMs": 2000, "finished": 1},
        ),
    ],
    ids=["admit-finish", "evict-readmit", "never-admitted-counts-as-zero"],
)
def test_summary_matches_kueue_recorder(events: list[tuple[float, Observation]], cq: dict[str, object],
                                        small: dict[str, object]) -> None:
    plan = expand(parse_config(one_queue(count=2), source="t"))
    rec = Recorder(plan)
    rec.queue_created("cq-0-0-cohort-0", 0.0)
    for at, o in events:
        rec.observe(o, at)
    summary = rec.summary(epoch_offset=0.0)
    got_cq = {k: v for k, v in summary["clusterQueueClasses"]["cq"].items() if k in cq}  # type: ignore[index]
    got_small = {k: v for k, v in summary["workloadClasses"]["small"].items() if k in small}  # type: ignore[index]
    assert (got_cq, got_small) == (cq, small)


def test_placement_check_counts_domains_and_broken_constraints() -> None:
    """required: pods in more than one rack break it; balanced: a rack holding part of a slice breaks it."""
    raw = tas_file(podCount=4, tasConstraint="required", tasLevel=RACK)
    raw["cohorts"][0]["queuesSets"][0]["workloadsSets"].append(  # type: ignore[index]
        {"count": 2, "creationIntervalMs": 100, "workloads": [
            {"className": "bal", "runtimeMs": 100, "request": 1, "podCount": 4, "tasConstraint": "balanced",
             "tasLevel": RACK, "sliceSize": 2}]})
    raw["cohorts"][0]["queuesSets"][0]["workloadsSets"][0]["count"] = 2  # type: ignore[index]
    plan = expand(parse_config(raw, source="t"))
    rack_of = {n.name: n.labels[RACK] for n in plan.nodes}
    assert sorted(rack_of.values()) == ["rack-0", "rack-0", "rack-1", "rack-1"]
    r0, r1 = sorted(n for n, r in rack_of.items() if r == "rack-0"), sorted(n for n, r in rack_of.items() if r == "rack-1")
    rec = Recorder(plan)
    placed = {
        "small-0-0-0": (r0[0], r0[1], r0[0], r0[1]),  # one rack: fine
        "small-0-1-0": (r0[0], r0[0], r0[0], r1[0]),  # two racks: broken
        "bal-1-0-0": (r0[0], r0[1], r1[0], r1[1]),  # a slice per rack: fine
        "bal-1-1-0": (r0[0], r0[0], r0[0], r1[0]),  # 3 + 1: a slice split
    }

    for name, nodes in placed.items():
        rec.observe(Observation(namespace="cq-0-0-cohort-0", name=name, quota_reserved=True, admitted=True, evicted=False,
                                finished=True, pod_nodes=nodes), 1.0)
    got = rec.placement(rack_of)
    assert {c: (v["checked"], v["averageDomains"], v["maxDomains"], v["violations"]) for c, v in got.items()} == {
        "small": (2, 1.5, 2, 1), "bal": (2, 2.0, 2, 1)}
    # A finished workload whose pod list does not have one pod per member is not judged.
    short = Observation(namespace="cq-0-0-cohort-0", name="small-0-1-0", quota_reserved=True, admitted=True, evicted=False,
                        finished=True, pod_nodes=(r0[0], r1[0]))
    rec2 = Recorder(plan)
    rec2.observe(short, 1.0)
    assert (rec2.placement(rack_of)["small"]["checked"], rec2.placement(rack_of)["small"]["podListMismatch"]) == (0, 1)


def test_summary_counts_quota_held_while_no_pod_ran() -> None:
    """Admitted at 1, its pod started 0.25 s later and ended 0.5 s before Finished was recorded:
    1 CPU held 0.75 s with nothing running."""
    plan = expand(parse_config(one_queue(count=1), source="t"))
    rec = Recorder(plan)
    rec.queue_created("cq-0-0-cohort-0", 0.0)
    rec.observe(ob("small-0-0-0"), 0.0)
    rec.observe(ob("small-0-0-0", **ADMIT), 1.0)
    done = Observation(namespace="cq-0-0-cohort-0", name="small-0-0-0", quota_reserved=True, admitted=True,
                       evicted=False, finished=True, dispatch_s=0.25, completion_s=0.5)
    rec.observe(done, 3.0)
    small = rec.summary(epoch_offset=0.0)["workloadClasses"]["small"]  # type: ignore[index]
    assert small["cpuHeldWithoutPods"] == 750_000  # mCPU·ms


def test_timeline_splits_held_and_running_quota_into_bins() -> None:
    """One 1-CPU workload of a queue with 1 CPU of nominal quota: reserved at 10.0, its pod ran 10.5-11.5,
    Finished at 12.0.  In 1-s bins: held all of bins 0 and 1; running half of bin 0 and half of bin 1."""
    plan = expand(parse_config(one_queue(count=1), source="t"))
    rec = Recorder(plan)
    rec.queue_created("cq-0-0-cohort-0", 0.0)
    done = Observation(namespace="cq-0-0-cohort-0", name="small-0-0-0", quota_reserved=True, admitted=True,
                       evicted=False, finished=True, timeline=(10.0, 10.5, 11.5, 12.0))
    rec.observe(done, 3.0)
    nominal_cpu = sum(q.nominal_m for q in plan.queues) / 1000
    share = round(100 / nominal_cpu, 1)
    bins = rec.timeline(1.0)
    assert [(b.start_s, b.held_pct, b.running_pct) for b in bins] == [
        (0.0, share, round(share / 2, 1)), (1.0, share, round(share / 2, 1)), (2.0, 0.0, 0.0)]
    assert bins[0].running_pct_by_size == {"small": round(share / 2, 1)}
    assert Recorder(plan).timeline(1.0) == []  # nothing finished: no timeline


def test_observation_reads_conditions_stamps_and_pods() -> None:
    """What the observer takes from one watched workload: the four condition flags, the controller's stamps
    (relative to creationTimestamp), and of a finished run its pods' start and end."""
    wl = {
        "metadata": {"namespace": "ns", "name": "w", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"},
                {"type": "Admitted", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"},
                {"type": "Finished", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"},
            ],
            "extra": {"lastPods": [{"phase": "Succeeded", "node": "n1", "startedAt": 1767225601.5,
                                    "finishedAt": 1767225604.0}]},
        },
    }
    got = observation(wl)
    assert (got.namespace, got.name, got.quota_reserved, got.admitted, got.evicted, got.finished) == (
        "ns", "w", True, True, False, True)
    assert (got.stamped_admit_s, got.stamped_finish_s, got.dispatch_s, got.completion_s) == (1.0, 5.0, 0.5, 1.0)
    assert got.timeline == (1767225601.0, 1767225601.5, 1767225604.0, 1767225605.0)
    assert (got.pod_phases, got.pod_nodes) == (("Succeeded",), ("n1",))
    pending = observation({"metadata": {"namespace": "ns", "name": "w"}, "status": {"conditions": [
        {"type": "QuotaReserved", "status": "False", "message": "waiting"}]}})
    assert (pending.quota_reserved, pending.finished, pending.pending_message) == (False, False, "waiting")


def test_phases_cut_the_wall_in_consecutive_parts() -> None:
    run = RunResult(completed=True, queues_created_at=12.0, first_created_at=12.5, last_created_at=20.0, done_at=30.0,
                    creation=CreationStats(), connected_at=11.5, returned_at=30.25)
    got = phases(spawned=10.0, ready=11.0, clients_ready=11.25, run=run, last_finished_at=30.0, scraped=31.0,
                 nodes_stopped=31.5, exited=32.0)
    assert got == {"controllerStart": 1.0, "clientsStart": 0.25, "queues": 0.75, "toFirstCreate": 0.5, "run": 17.5,
                   "runEnd": 0.25, "metricsScrape": 0.75, "fakeNodesStop": 0.5, "controllerStop": 0.5}
    assert sum(got.values()) == 32.0 - 10.0
    # A run that did not complete ends its "run" phase when drive() gave up.
    unfinished = phases(spawned=10.0, ready=11.0, clients_ready=11.25, run=run, last_finished_at=None, scraped=31.0,
                        nodes_stopped=31.5, exited=32.0)
    assert (unfinished["run"], unfinished["runEnd"], sum(unfinished.values())) == (17.75, 0.0, 22.0)


def test_wait_exit_wakes_on_exit_and_times_out_on_a_live_process() -> None:
    popen = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert not _wait_exit(popen, 0.05)
        assert popen.stdin is not None
        popen.stdin.close()  # the child's read ends: it exits
        assert _wait_exit(popen, 30.0)
        assert popen.returncode == 0
    finally:
        popen.kill()
        popen.wait()


def test_fake_nodes_without_an_address_on_stdin_give_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert fakenode.main(["--controller", "-", "--waiting-file", str(tmp_path / "waiting")]) == 2
    assert json.loads((tmp_path / "waiting").read_text())["pid"] == os.getpid()


def test_small_run_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The whole bench on 20 workloads: the observer process's recorder comes back, its watch kept up,
    and the phases add up to the controller's wall."""
    config = tmp_path / "generator.yaml"
    config.write_text(json.dumps(one_queue(count=20, runtime_ms=200)))
    rc = run_bench(["--config", str(config), "--progress", "0", "--time-scale", "0.5", "--nodes", "4",
                    "--output", str(tmp_path / "out")])
    assert rc == 0
    result = json.loads(capsys.readouterr().out)
    run = result["run"]
    assert (run["completed"], run["watchError"], run["watchRestarts"]) == (True, "", 0)
    assert result["summary"]["workloadClasses"]["small"]["finished"] == 20
    assert run["watchEvents"] >= 20 * 3  # created, admitted, finished at least
    phases_s = result["phasesS"]
    assert list(phases_s) == ["controllerStart", "clientsStart", "queues", "toFirstCreate", "run", "runEnd",
                              "metricsScrape", "fakeNodesStop", "controllerStop"]
    assert min(phases_s.values()) >= 0
    assert abs(sum(phases_s.values()) - result["cmdStats"]["wallMs"] / 1000) < 0.02
    assert phases_s["run"] == pytest.approx(run["runWallS"], abs=0.01)
    assert run["observerProcessCpuS"] > 0 and run["benchProcessCpuS"] >= run["submitterProcessCpuS"]
    assert (tmp_path / "out" / "wlStates.csv").read_text().count("\n") == 21
