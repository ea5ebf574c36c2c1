"""The Admission Fair Sharing ledger (Cache.afs_admitted) is counted only once something reads it.

Without Admission Fair Sharing configured, admissions and releases leave it
alone until a DominantResourceShare queue first asks a LocalQueue's share;
it is then counted from the admitted workloads and kept from there on.  What
it says must be what counting every admission and release one by one says
(the way it was kept before), wherever the first read falls.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sluicegate.controller.cache import Cache
from sluicegate.model.config import AdmissionFairSharingConfig, ControllerConfig
from tests.builders import cluster_queue, flavor, group, local_queue, with_admission, workload

QUEUES = ("lq-a", "lq-b", "lq-c")


def _cache(config: ControllerConfig | None = None) -> Cache:
    c = Cache(config=config or ControllerConfig())
    c.set_cluster_queue(cluster_queue("cq", group(flavor("default", cpu="100", memory="100Gi"))))
    for name in QUEUES:
        c.set_local_queue(local_queue(name, "cq"))
    return c


def _counted_one_by_one(steps: list[tuple[bool, int, int, int]]) -> dict[tuple[str, str], dict[str, float]]:
    """The ledger as every admission and release counted into it (Cache._afs_count on each)."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    held: dict[int, tuple[str, int]] = {}
    for admit, n, lq, cpus in steps:
        if admit and n not in held:
            held[n] = (QUEUES[lq], cpus)
            sign, (queue, amount) = 1, held[n]
        elif not admit and n in held:
            sign, (queue, amount) = -1, held.pop(n)
        else:
            continue
        counts = out.setdefault(("default", queue), {})
        counts["cpu"] = counts.get("cpu", 0.0) + sign * amount * 1000
    return out


def _play(c: Cache, steps: list[tuple[bool, int, int, int]], read_at: int | None) -> None:
    for i, (admit, n, lq, cpus) in enumerate(steps):
        if i == read_at:
            c._afs_ledger()
        key = f"default/w{n}"
        if admit and key not in c.holder:
            w = workload(f"w{n}", queue=QUEUES[lq], requests={"cpu": cpus})
            c.add_admitted(with_admission(w, "cq", {"cpu": "default"}), 0.0)
        elif not admit:
            c.release(key)  # type: ignore[arg-type]


steps_st = st.lists(st.tuples(st.booleans(), st.integers(0, 6), st.integers(0, 2), st.integers(1, 4)), max_size=30)


@settings(max_examples=200, deadline=None)
@given(steps=steps_st, read_at=st.one_of(st.none(), st.integers(0, 30)))
def test_a_ledger_first_read_late_holds_what_counting_all_along_gives(steps, read_at) -> None:  # type: ignore[no-untyped-def]
    """Without Admission Fair Sharing: the positive counts (all a DominantResourceShare queue reads) are the same."""
    c = _cache()
    _play(c, steps, read_at)
    assert _positive(c._afs_ledger()) == _positive(_counted_one_by_one(steps))


def _positive(ledger: dict[tuple[str, str], dict[str, float]]) -> dict[tuple[str, str], dict[str, float]]:
    out = {lq: {r: v for r, v in counts.items() if v > 0} for lq, counts in ledger.items()}
    return {lq: counts for lq, counts in out.items() if counts}


@settings(max_examples=100, deadline=None)
@given(steps=steps_st)
def test_under_admission_fair_sharing_the_ledger_is_kept_from_the_start(steps) -> None:  # type: ignore[no-untyped-def]
    """Every count, zeros included, as one by one: the stored usage decays what it holds."""
    c = _cache(ControllerConfig(admission_fair_sharing=AdmissionFairSharingConfig()))
    _play(c, steps, None)
    assert c.afs_admitted == _counted_one_by_one(steps)
