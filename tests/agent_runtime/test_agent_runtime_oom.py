"""Memory limits: the kernel's OOM killer under cgroups, RSS polling without them."""

from __future__ import annotations

import pytest
from agent_runtime_support import MI, RuntimeFactory, pod, py

from sluicegate.agent.cgroups import CgroupDriver
from sluicegate.agent.runtime import EXIT_CODE_OOM, ContainerState, PodPhase, Reason, RestartPolicy

# Grows by 8 MiB every 10 ms up to 512 MiB, touching every page (b"x" * n
# writes its bytes; a zero-filled buffer could stay unbacked), then holds it.
HOG = (
    "import time\n"
    "hog = []\n"
    "for _ in range(64):\n"
    "    hog.append(b'x' * (8 << 20))\n"
    "    time.sleep(0.01)\n"
    "print('survived', flush=True)\n"
    "time.sleep(1000)\n"
)


@pytest.fixture(params=["v1", "v2-full", "none"])
def memory_driver(request: pytest.FixtureRequest) -> CgroupDriver:
    name = {"v1": "v1_driver", "v2-full": "v2_full_driver", "none": "no_cgroups"}[request.param]
    value: CgroupDriver = request.getfixturevalue(name)
    return value


async def test_container_over_its_memory_limit_is_oom_killed(
    memory_driver: CgroupDriver, make_runtime: RuntimeFactory
) -> None:
    runtime = make_runtime(memory_driver)
    spec = pod(py("hog", HOG, limits={"memory": 64 * MI}), policy=RestartPolicy.NEVER)
    await runtime.run(spec)
    final = await runtime.wait(spec.uid, timeout=20)
    hog = final.container("hog")
    assert hog.terminated is not None
    how = "its RSS, polled," if memory_driver.kind == "none" else "the kernel OOM killer saw it"
    assert (final.phase, hog.state, hog.terminated.exit_code, hog.terminated.reason, hog.terminated.message) == (
        PodPhase.FAILED,
        ContainerState.TERMINATED,
        EXIT_CODE_OOM,
        Reason.OOM_KILLED,
        f"memory limit of {64 * MI} bytes exceeded ({how})",
    )
    assert "survived" not in runtime.log_path(spec.uid, "hog").read_text()
