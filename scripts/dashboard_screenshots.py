#!/usr/bin/env python3
"""Screenshots of the dashboard's main pages for docs/dashboard.md (docs/img/dashboard-*.png).

Starts a throw-away controller and agent on loopback (plaintext: no login
needed), applies two teams' queues in one cohort, submits a few workloads,
and photographs each page in Debian's headless Chromium.  Run from the
repository root with the project's virtualenv:

    .venv/bin/python scripts/dashboard_screenshots.py [--out docs/img]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from tests.integration.harness import Agent, Controller, sluicectl, wait_for  # noqa: E402

QUEUES = """
apiVersion: sluicegate.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: sluicegate.io/v1beta2
kind: Cohort
metadata: {name: research}
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohortName: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "2"}
      - {name: memory, nominalQuota: 4Gi}
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohortName: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "2", lendingLimit: "1"}
      - {name: memory, nominalQuota: 4Gi}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: team-a}
spec: {clusterQueue: team-a}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: team-b}
spec: {clusterQueue: team-b}
"""

# (namespace, name, cpu, memory, command)
JOBS = [
    ("team-a", "train-resnet", "1500m", "1Gi", ["sleep", "600"]),
    ("team-a", "eval-nightly", "1", "512Mi", ["sleep", "600"]),
    ("team-b", "etl-daily", "500m", "256Mi", ["sleep", "600"]),
    ("team-a", "sweep-large", "3", "1Gi", ["true"]),
    ("team-b", "report", "100m", "64Mi", ["true"]),
]
PAGES = [("cohorts", "cohorts", "li[data-key='cq/team-a'] tr"),
         ("queues", "queues", "#localqueues tbody tr"),
         ("workloads", "workloads", "#workloads tbody tr"),
         ("workload", "workload/team-a/train-resnet", "#pods td.node"),
         ("nodes", "nodes", "#nodes tbody tr")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    ns = parser.parse_args()
    ns.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sg-shots-") as tmp_name:
        tmp = Path(tmp_name)
        c = Controller(tmp).start()
        agent = Agent(tmp, c.address, "node-1", allocatable="cpu=4,memory=8Gi").start()
        try:
            (tmp / "queues.yaml").write_text(QUEUES)
            sluicectl(c.address, "apply", "-f", str(tmp / "queues.yaml"))
            for namespace, name, cpu, mem, cmd in JOBS:
                sluicectl(c.address, "run", "-n", namespace, "-q", "main", "--name", name, "--cpu", cpu,
                          "--memory", mem, "--", *cmd)
            wait_for("three workloads running", lambda: sluicectl(c.address, "get", "workloads", "-A").stdout
                     .count("Admitted") >= 3, timeout=60)
            opts = webdriver.ChromeOptions()
            for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        "--no-first-run", "--window-size=1200,720", "--hide-scrollbars"):
                opts.add_argument(arg)
            opts.binary_location = "/usr/bin/chromium"
            driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=opts)
            try:
                for shot, hash_, ready in PAGES:
                    driver.get(f"{c.dashboard}#/{hash_}")
                    WebDriverWait(driver, 30).until(lambda d, css=ready: d.find_elements(By.CSS_SELECTOR, css))
                    WebDriverWait(driver, 10).until(
                        lambda d: d.find_element(By.ID, "live").text == "live")
                    # The whole page, not just the first screenful: the window grows to the content.
                    height = driver.execute_script("return document.body.scrollHeight")
                    inner = driver.execute_script("return window.innerHeight")
                    outer = driver.get_window_size()["height"]
                    driver.set_window_size(1200, min(1400, int(height) + 24 + outer - int(inner)))
                    path = ns.out / f"dashboard-{shot}.png"
                    driver.save_screenshot(str(path))
                    print(f"{path} ({path.stat().st_size // 1024} KiB)")
            finally:
                driver.quit()
        finally:
            agent.stop()
            c.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
