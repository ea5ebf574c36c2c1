"""The checkpoint file: atomic replacement, exact round trips, clear errors."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from agent_runtime_support import MI, RuntimeFactory, fast_config, pod, sh

from sluicegate.agent import checkpoint
from sluicegate.agent.cgroups import CgroupDriver
from sluicegate.agent.checkpoint import (
    Checkpoint,
    CheckpointError,
    ContainerRecord,
    PodRecord,
    StopRecord,
    TerminationRecord,
)
from sluicegate.agent.runtime import (
    Container,
    ContainerState,
    Pod,
    Reason,
    RestartPolicy,
    RunAs,
    spec_from_json,
    spec_to_json,
)
from sluicegate.agent.runtime.state import LivePod


def _record(uid: str = "pod-a") -> PodRecord:
    spec = pod(sh("main", "sleep 1"), uid=uid)
    return PodRecord(
        uid=uid,
        spec=spec_to_json(spec),
        phase="Running",
        finished=False,
        reason="Killed",
        message="stopping",
        stop=StopRecord(reason="Killed", message="stopping", deadline=1234.5),
        containers=(
            ContainerRecord(
                name="main",
                state="Running",
                pid=4242,
                start_ticks=987654,
                cgroup=(("memory", "/sys/fs/cgroup/memory/sluicegate/pod-a/main"),),
                log_path="/data/pods/pod-a/main.log",
                restart_count=2,
                backoff_index=2,
                oom_kills_at_start=1,
                started_at=1000.25,
                starting=False,
                waiting_reason=None,
                terminated=None,
                last_termination=TerminationRecord(
                    exit_code=1,
                    reason="Error",
                    message="exited with code 1",
                    started_at=None,
                    finished_at=999.0,
                    signal=None,
                ),
            ),
        ),
    )


def test_round_trip_is_exact(tmp_path: Path) -> None:
    path = checkpoint.path_for(tmp_path)
    original = Checkpoint(boot_id="boot-1", seq=17, written_at=1500.0, pods=(_record("pod-a"), _record("pod-b")))
    checkpoint.save(path, original)
    assert checkpoint.load(path) == original
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json"]  # no temporary left behind


def test_save_replaces_the_whole_file(tmp_path: Path) -> None:
    path = checkpoint.path_for(tmp_path)
    checkpoint.save(path, Checkpoint(boot_id="b", seq=1, written_at=1.0, pods=(_record("pod-a"),)))
    checkpoint.save(path, Checkpoint(boot_id="b", seq=2, written_at=2.0, pods=()))
    assert checkpoint.load(path) == Checkpoint(boot_id="b", seq=2, written_at=2.0, pods=())


def test_missing_checkpoint_is_none(tmp_path: Path) -> None:
    assert checkpoint.load(tmp_path / "checkpoint.json") is None


def test_unwritable_location_is_an_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(CheckpointError) as caught:
        checkpoint.save(blocker / "checkpoint.json", Checkpoint(boot_id="b", seq=1, written_at=1.0, pods=()))
    assert caught.value.path == str(blocker / "checkpoint.json")
    assert caught.value.detail.startswith("could not write: ")


def _valid() -> checkpoint.JSONObject:
    return checkpoint.encode(Checkpoint(boot_id="b", seq=1, written_at=1.0, pods=(_record(),)))


def _with(mutate: str) -> str:
    obj = json.loads(json.dumps(_valid()))
    pod0 = obj["pods"][0]
    container = pod0["containers"][0]
    if mutate == "torn":
        return json.dumps(obj)[:40]
    if mutate == "version":
        obj["version"] = 99
    elif mutate == "pid-type":
        container["pid"] = "4242"
    elif mutate == "missing-uid":
        del pod0["uid"]
    elif mutate == "cgroup-shape":
        container["cgroup"] = ["memory"]
    elif mutate == "top-level":
        return "[]"
    return json.dumps(obj)


@pytest.mark.parametrize(
    ("mutate", "detail"),
    [
        pytest.param("torn", "not valid JSON (", id="torn-file"),
        pytest.param("version", "format version 99 is not 1", id="version"),
        pytest.param(
            "pid-type", "checkpoint.pods[0].containers[0].pid: expected an integer or null, found str", id="pid"
        ),
        pytest.param("missing-uid", "checkpoint.pods[0].uid: expected a string, found nothing", id="uid"),
        pytest.param(
            "cgroup-shape",
            "checkpoint.pods[0].containers[0].cgroup: expected a list of [controller, directory] pairs, found list",
            id="cgroup",
        ),
        pytest.param("top-level", "expected a JSON object at the top level", id="top-level"),
    ],
)
def test_bad_checkpoint_names_the_problem(tmp_path: Path, mutate: str, detail: str) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_text(_with(mutate))
    with pytest.raises(CheckpointError) as caught:
        checkpoint.load(path)
    assert caught.value.path == str(path)
    assert caught.value.detail.startswith(detail)
    assert "will not start pods until the file is repaired or removed" in str(caught.value)


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(pod(sh("main", "true")), id="minimal"),
        pytest.param(
            Pod(
                uid="pod-x",
                namespace="team-a",
                name="trainer",
                restart_policy=RestartPolicy.ON_FAILURE,
                termination_grace_seconds=12.5,
                containers=(
                    Container(
                        name="main",
                        command=("python", "-m", "train"),
                        args=("--epochs", "3"),
                        env=(("A", "1"), ("A", "2")),
                        working_dir="/srv",
                        limits={"cpu": 1500, "memory": 512 * MI},
                        requests={"cpu": 500, "memory": 256 * MI},
                    ),
                    Container(name="side", command=("sleep", "1")),
                ),
            ),
            id="everything",
        ),
    ],
)
def test_spec_codec_round_trip(spec: Pod) -> None:
    assert spec_from_json(json.loads(json.dumps(spec_to_json(spec))), path="x") == spec


def test_spec_codec_keeps_the_pods_user_and_reads_checkpoints_from_before_users() -> None:
    spec = Pod(uid="u", containers=(Container(name="main", command=("true",)),),
                   run_as=RunAs(uid=65534, gid=65534, no_new_privs=True))
    assert spec_from_json(json.loads(json.dumps(spec_to_json(spec))), path="x") == spec
    old = spec_to_json(spec)
    del old["runAs"]
    assert spec_from_json(old, path="x").run_as is None
    bad = {**spec_to_json(spec), "runAs": {"uid": "nobody", "gid": 1, "noNewPrivs": True}}
    with pytest.raises(checkpoint.CheckpointError, match="runAs.uid"):
        spec_from_json(bad, path="x")


def test_checkpoint_file_is_plain_json(tmp_path: Path) -> None:
    path = checkpoint.path_for(tmp_path)
    checkpoint.save(path, Checkpoint(boot_id="b", seq=1, written_at=1.0, pods=(_record(),)))
    obj = json.loads(path.read_text())
    assert (obj["version"], obj["pods"][0]["containers"][0]["pid"], obj["pods"][0]["spec"]["uid"]) == (1, 4242, "pod-a")
    assert os.path.getsize(path) > 0


# --- the runtime's writer: two reused slot files, one renamed over the target per write -------------


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _same_file(a: Path, b: Path) -> bool:
    first, second = a.stat(), b.stat()
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def test_atomic_file_alternates_between_two_slots(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "state.json"  # the directory is created by the first write
    written = checkpoint.AtomicFile(target)
    seen: list[tuple[bytes, bool, bool]] = []
    for data in (b"first, and longer than the rest", b"second", b"third"):
        written.replace(data)
        slot_a, slot_b = target.parent / ".state.json.slot-a", target.parent / ".state.json.slot-b"
        seen.append((target.read_bytes(), _same_file(target, slot_a), slot_b.exists() and _same_file(target, slot_b)))
    assert seen == [
        (b"first, and longer than the rest", True, False),
        (b"second", False, True),
        (b"third", True, False),
    ]
    assert _names(target.parent) == [".state.json.slot-a", ".state.json.slot-b", "state.json"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("leftover", "torn_slot"),
    [
        pytest.param(False, True, id="writer-died-while-writing-the-free-slot"),
        pytest.param(True, False, id="writer-died-between-link-and-rename"),
    ],
)
def test_a_writer_killed_mid_write_leaves_the_target_whole(tmp_path: Path, leftover: bool, torn_slot: bool) -> None:
    target = tmp_path / "state.json"
    checkpoint.AtomicFile(target).replace(b"whole")  # the target now names slot-a
    slot_b = tmp_path / ".state.json.slot-b"
    if torn_slot:
        slot_b.write_bytes(b"to")  # what a killed writer leaves: half of its next content
    if leftover:
        os.link(tmp_path / ".state.json.slot-a", tmp_path / ".state.json.link")
    assert target.read_bytes() == b"whole"
    # The next agent's writer finds the free slot by itself and carries on.
    checkpoint.AtomicFile(target).replace(b"next")
    assert (target.read_bytes(), _same_file(target, slot_b)) == (b"next", True)
    assert _names(tmp_path) == [".state.json.slot-a", ".state.json.slot-b", "state.json"]


def test_checkpoint_file_writes_what_save_writes(tmp_path: Path) -> None:
    whole = Checkpoint(boot_id="boot-1", seq=3, written_at=15.0, pods=(_record("pod-a"), _record("pod-b")))
    checkpoint.save(tmp_path / "saved.json", whole)
    # A file replaced by someone else (an operator restoring a copy) is simply replaced again.
    checkpoint.save(tmp_path / "batched.json", Checkpoint(boot_id="old", seq=1, written_at=1.0, pods=()))
    checkpoint.CheckpointFile(tmp_path / "batched.json").write(
        boot_id="boot-1", seq=3, written_at=15.0, pods=[checkpoint.encode_pod(record) for record in whole.pods],
        version=1,  # no node records: the runtime's records alone
    )
    assert (tmp_path / "batched.json").read_bytes() == (tmp_path / "saved.json").read_bytes()
    assert checkpoint.load(tmp_path / "batched.json") == whole


def test_checkpoint_file_write_failure_is_a_checkpoint_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(CheckpointError) as caught:
        checkpoint.CheckpointFile(blocker / "checkpoint.json").write(boot_id="b", seq=1, written_at=1.0, pods=[])
    assert (caught.value.path, caught.value.detail.startswith("could not write: ")) == (
        str(blocker / "checkpoint.json"),
        True,
    )


def test_the_node_records_travel_in_the_same_file_and_are_absent_from_older_ones(tmp_path: Path) -> None:
    node = ({"uid": "pod-a", "workload": "wl-1", "containers": ["main"]}, {"uid": "pod-b", "workload": "wl-2"})
    whole = Checkpoint(boot_id="boot-1", seq=3, written_at=15.0, pods=(_record("pod-a"),), node_records=node)
    checkpoint.save(tmp_path / "saved.json", whole)
    node_text = [json.dumps(record, separators=(",", ":"), sort_keys=True) for record in node]
    checkpoint.CheckpointFile(tmp_path / "batched.json").write(
        boot_id="boot-1", seq=3, written_at=15.0,
        pods=["".join(checkpoint.entry_pieces(node_text[0], checkpoint.encode_pod(whole.pods[0]))),
              "".join(checkpoint.entry_pieces(node_text[1], None))],
    )
    assert (tmp_path / "batched.json").read_bytes() == (tmp_path / "saved.json").read_bytes()
    assert checkpoint.load(tmp_path / "batched.json") == whole
    # Written before the node kept its records here: None, so the agent reads pods-meta.json instead.
    checkpoint.save(tmp_path / "older.json", Checkpoint(boot_id="b", seq=1, written_at=1.0, pods=()))
    loaded = checkpoint.load(tmp_path / "older.json")
    assert loaded is not None and loaded.node_records is None


def test_node_records_that_are_not_objects_make_the_checkpoint_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_text(json.dumps({"version": 1, "bootId": "b", "seq": 1, "writtenAt": 1.0, "pods": [], "node": [3]}))
    with pytest.raises(CheckpointError, match="checkpoint.node"):
        checkpoint.load(path)


def test_each_pod_has_one_record_holding_its_node_and_runtime_parts(tmp_path: Path) -> None:
    node = ({"uid": "pod-a", "workload": "wl-1"}, {"uid": "pod-b", "workload": "wl-2", "rejected": True})
    whole = Checkpoint(boot_id="boot-1", seq=3, written_at=15.0, pods=(_record("pod-a"), _record("pod-c")),
                       node_records=node)
    checkpoint.save(tmp_path / "checkpoint.json", whole)
    document = json.loads((tmp_path / "checkpoint.json").read_text())
    assert document["version"] == 2 and "node" not in document
    # pod-b was rejected (no processes): a record without a runtime part; pod-c has no node part.
    assert [(sorted(r), (r.get("node") or r["runtime"])["uid"]) for r in document["pods"]] == [
        (["node", "runtime"], "pod-a"), (["node"], "pod-b"), (["runtime"], "pod-c")]
    assert checkpoint.load(tmp_path / "checkpoint.json") == whole


def test_the_version_1_layout_with_a_separate_node_list_still_loads(tmp_path: Path) -> None:
    """What agents wrote before one record per pod: runtime records in ``pods``, the node's in ``node``."""
    record = json.loads(checkpoint.encode_pod(_record("pod-a")))
    path = tmp_path / "checkpoint.json"
    path.write_text(json.dumps({"version": 1, "bootId": "boot-1", "seq": 3, "writtenAt": 15.0, "pods": [record],
                                "node": [{"uid": "pod-a", "workload": "wl-1"}, {"uid": "pod-b"}]}))
    loaded = checkpoint.load(path)
    assert loaded is not None
    assert (loaded.pods, loaded.node_records) == ((_record("pod-a"),), ({"uid": "pod-a", "workload": "wl-1"},
                                                                          {"uid": "pod-b"}))


def test_a_record_whose_parts_name_different_pods_makes_the_checkpoint_unreadable(tmp_path: Path) -> None:
    record = json.loads(checkpoint.encode_pod(_record("pod-a")))
    path = tmp_path / "checkpoint.json"
    path.write_text(json.dumps({"version": 2, "bootId": "b", "seq": 1, "writtenAt": 1.0,
                                "pods": [{"node": {"uid": "pod-b"}, "runtime": record}]}))
    with pytest.raises(CheckpointError, match="node part of 'pod-b'"):
        checkpoint.load(path)


@pytest.mark.parametrize(
    "message",
    [pytest.param("stopping", id="plain"), pytest.param('a ,"stop": inside', id="key-like-text"),
     pytest.param("", id="empty")],
)
@pytest.mark.parametrize("stopping", [True, False], ids=["stop", "no-stop"])
def test_a_record_with_its_spec_encoded_once_is_the_same_text(message: str, stopping: bool) -> None:
    # The runtime encodes a pod's spec once and splices it into each new record of the pod.
    base = _record()
    record = PodRecord(
        uid=base.uid, spec=base.spec, phase=base.phase, finished=base.finished, reason=base.reason, message=message,
        stop=StopRecord(reason="Killed", message=message, deadline=1.5) if stopping else None,
        containers=base.containers,
    )
    spliced = checkpoint.encode_pod(record, spec_text=checkpoint.encode_spec(record.spec))
    assert spliced == checkpoint.encode_pod(record)
    assert json.loads(spliced)["spec"] == record.spec


async def test_the_runtime_writes_each_record_as_encode_pod_would(
    driver: CgroupDriver, make_runtime: RuntimeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runtime builds a pod's record text from its live state: every text it writes over a pod's life (a
    start, a failed run and its restart, a stop with its grace) is what encode_pod writes for the record it
    reads back as."""
    runtime = make_runtime(driver, config=fast_config(backoff_base_seconds=0.01, backoff_cap_seconds=0.01))
    direct = runtime._record_text
    compared: list[str] = []

    def checked(live: LivePod, spec_text: str) -> str:
        text = direct(live, spec_text)
        record = checkpoint.decode({"version": 1, "bootId": "b", "seq": 1, "writtenAt": 1.0,
                                    "pods": [json.loads(text)]}, path="test").pods[0]
        assert text == checkpoint.encode_pod(record) == checkpoint.encode_pod(record, spec_text=spec_text)
        compared.append(text)
        return text

    monkeypatch.setattr(runtime, "_record_text", checked)
    await runtime.adopt(None)
    spec = pod(sh("main", "test -e restarted && exec sleep 30; touch restarted; exit 3"),
               policy=RestartPolicy.ON_FAILURE, grace=5.0)
    await runtime.run(spec)
    await runtime.wait_for(spec.uid, lambda s: s.container("main").restart_count == 1
                           and s.container("main").state is ContainerState.RUNNING, timeout=10)
    await runtime.stop(spec.uid, grace_seconds=5.0, reason=Reason.KILLED, message='stopped ,"stop": here')
    # A runtime on its own writes version 1: its records alone.
    assert json.loads(runtime.checkpoint_path.read_text())["pods"] == [json.loads(compared[-1])]
    assert json.loads(compared[-1])["stop"]["message"] == 'stopped ,"stop": here'
    assert json.loads(compared[-1])["containers"][0]["lastTermination"]["exitCode"] == 3
