"""Fixtures for the agent runtime tests: real cgroups (cleaned up), runtimes (stopped and closed)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from agent_runtime_support import RuntimeFactory, fast_config, unified_mount, unique

from sluicegate.agent.cgroups import (
    DEFAULT_ROOT,
    PARENT_SELF,
    V2_CONTROLLERS,
    CgroupDriver,
    CgroupUnavailable,
    CgroupV1,
    CgroupV2,
    NoCgroups,
)
from sluicegate.agent.runtime import Clock, PodRuntime, RuntimeConfig


async def _teardown(driver: CgroupDriver, bases: list[Path]) -> None:
    await driver.sweep(keep=frozenset())
    await driver.remove_base()
    left = [str(base) for base in bases if base.exists()]
    assert not left, f"test cgroups left behind: {left}"


# Test cgroups nest under the test process's own cgroup in every hierarchy
# (parent "self"), each test with its own base, so nothing escapes the
# sandbox's accounting and tests cannot see each other's pods.


@pytest.fixture
async def v1_driver() -> AsyncIterator[CgroupV1]:
    try:
        driver = CgroupV1.setup(root=DEFAULT_ROOT, parent=PARENT_SELF, base=unique("sluicegate-test"))
    except CgroupUnavailable as exc:
        pytest.skip(f"cgroup v1 is not writable here: {exc}")
    bases = list(driver.base_dirs)
    yield driver
    await _teardown(driver, bases)


@pytest.fixture
async def v2_driver() -> AsyncIterator[CgroupV2]:
    """v2 with placement, cgroup.kill and removal only: this machine delegates no controllers."""
    mount = unified_mount()
    if mount is None:
        pytest.skip("no cgroup2 hierarchy mounted")
    try:
        driver = CgroupV2.setup(
            mount=mount, parent=PARENT_SELF, base=unique("sluicegate-test"), controllers=frozenset()
        )
    except CgroupUnavailable as exc:
        pytest.skip(f"cgroup v2 is not writable here: {exc}")
    bases = list(driver.base_dirs)
    yield driver
    await _teardown(driver, bases)


@pytest.fixture
async def v2_full_driver() -> AsyncIterator[CgroupV2]:
    """v2 with memory, cpu and pids delegated (real v2 nodes; skipped on this hybrid machine)."""
    mount = unified_mount()
    if mount is None:
        pytest.skip("no cgroup2 hierarchy mounted")
    try:
        driver = CgroupV2.setup(
            mount=mount, parent=PARENT_SELF, base=unique("sluicegate-test"), controllers=V2_CONTROLLERS
        )
    except CgroupUnavailable as exc:
        pytest.skip(f"cgroup v2 controllers are not delegated here: {exc.detail}")
    bases = list(driver.base_dirs)
    yield driver
    await _teardown(driver, bases)


@pytest.fixture
def no_cgroups() -> NoCgroups:
    return NoCgroups()


@pytest.fixture(params=["v1", "v2", "none"])
def driver(request: pytest.FixtureRequest) -> CgroupDriver:
    """Every driver this machine can run: cgroup v1, cgroup v2 (placement only), none."""
    name = {"v1": "v1_driver", "v2": "v2_driver", "none": "no_cgroups"}[request.param]
    value: CgroupDriver = request.getfixturevalue(name)
    return value


@pytest.fixture(params=["v1", "v2"])
def cgroup_driver(request: pytest.FixtureRequest) -> CgroupDriver:
    """The drivers that place processes in cgroups."""
    name = {"v1": "v1_driver", "v2": "v2_driver"}[request.param]
    value: CgroupDriver = request.getfixturevalue(name)
    return value


@pytest.fixture
async def make_runtime(tmp_path: Path) -> AsyncIterator[RuntimeFactory]:
    made: list[PodRuntime] = []

    def make(
        cgroups: CgroupDriver,
        *,
        clock: Clock | None = None,
        config: RuntimeConfig | None = None,
        data_dir: Path | None = None,
    ) -> PodRuntime:
        runtime = PodRuntime(
            data_dir=data_dir or tmp_path / "data",
            cgroups=cgroups,
            clock=clock,
            config=config or fast_config(),
        )
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        if runtime.closed:
            continue  # handed its pods to another runtime
        for status in runtime.pods():
            if not status.finished:
                await runtime.stop(status.uid, grace_seconds=0)
        await runtime.close()


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "work"
    path.mkdir()
    yield path
