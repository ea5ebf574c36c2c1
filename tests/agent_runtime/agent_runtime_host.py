"""An agent stand-in: runs pods with a PodRuntime in its own process, so a test can kill -9 it.

Usage: python agent_runtime_host.py DATA_DIR DRIVER BASE SPECS_JSON
DRIVER is "v1" or "none"; BASE is the cgroup base (under the process's own
cgroups).  Prints one JSON line {uid: {container: pid}} once every pod runs,
then waits to be killed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from sluicegate.agent import checkpoint
from sluicegate.agent.cgroups import DEFAULT_ROOT, PARENT_SELF, CgroupDriver, CgroupV1, NoCgroups
from sluicegate.agent.runtime import PodRuntime, spec_from_json


async def main(data_dir: Path, driver_name: str, base: str, specs_path: Path) -> None:
    driver: CgroupDriver
    if driver_name == "v1":
        driver = CgroupV1.setup(root=DEFAULT_ROOT, parent=PARENT_SELF, base=base)
    else:
        driver = NoCgroups()
    runtime = PodRuntime(data_dir=data_dir, cgroups=driver)
    await runtime.adopt(checkpoint.load(runtime.checkpoint_path))
    pids: dict[str, dict[str, int | None]] = {}
    for obj in json.loads(specs_path.read_text()):
        status = await runtime.run(spec_from_json(obj, path=str(specs_path)))
        pids[status.uid] = {c.name: c.pid for c in status.containers}
    print(json.dumps(pids), flush=True)
    await asyncio.get_running_loop().create_future()  # until SIGKILL


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])))
