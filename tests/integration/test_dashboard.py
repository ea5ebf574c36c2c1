"""The web dashboard in a real headless Chromium, against a real controller and agent over TLS.

The browser logs in with a bearer token through the login form (a client
certificate is checked with Python's HTTP client: headless Chromium has no
certificate store to pick one from).  Numbers on the pages are compared with
what sluicectl reads from the API.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluicegate.quantity import format_canonical
from sluicegate.security import pki

from .harness import Agent, Controller, sluicectl, wait_for
from .test_security import init, run

pytestmark = pytest.mark.integration

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# Every wait in the browser is on a condition, bounded by this.
DEADLINE = 30.0

QUEUES = """
apiVersion: sluicegate.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: sluicegate.io/v1beta2
kind: Cohort
metadata: {name: org}
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-a}
spec:
  cohortName: org
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "1"}
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-b}
spec:
  cohortName: org
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "1", lendingLimit: "1"}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec: {clusterQueue: cq-a}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team-b}
spec: {clusterQueue: cq-b}
"""

# User text the page must show as text: annotations accept any characters.
XSS = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">"


@dataclass
class Cluster:
    controller: Controller
    admin: Path
    pki: Path
    tokens: dict[str, str]

    @property
    def url(self) -> str:
        return self.controller.dashboard

    def ctl(self, *args: str) -> str:
        return sluicectl(self.controller.address, *args, config=self.admin).stdout

    def get(self, *args: str) -> Any:
        return json.loads(self.ctl("get", *args, "-o", "json"))

    def https(self, path: str, *, token: str = "", cert: bool = False, data: bytes | None = None,
              ) -> tuple[int, dict[str, str], bytes]:
        """A request from Python, verifying the dashboard against the cluster CA."""
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        if cert:
            cfg = yaml.safe_load(self.admin.read_text())
            pem = self.pki.parent / "admin-client.pem"
            pem.write_text(cfg["clientKey"] + cfg["clientCertificate"])
            ctx.load_cert_chain(str(pem))
        req = urllib.request.Request(self.url.rstrip("/") + path, data=data,
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("dashboard")
    data, admin = tmp / "controller", tmp / "admin.conf"
    init(data, admin)
    tokens = {"boss": "boss-token-1", "viewer": "viewer-token-1"}
    entries = [{"user": u, "groups": [], "sha256": run("-m", "sluicegate.controller.server", "hash-token",
                                                       input=t + "\n").stdout.strip()} for u, t in tokens.items()]
    (tmp / "tokens.yaml").write_text(yaml.safe_dump({"tokens": entries}))
    (tmp / "policy.yaml").write_text("bindings:\n- {role: cluster-admin, users: [boss]}\n"
                                     "- {role: view, namespaces: [team-a], users: [viewer]}\n")
    (tmp / "controller.yaml").write_text(yaml.safe_dump({
        "tokenFile": str(tmp / "tokens.yaml"), "authorizationPolicy": str(tmp / "policy.yaml")}))
    c = Controller(tmp, extra=["--pki-dir", str(data / "pki"), "--token-listen", "127.0.0.1:0",
                               "--config", str(tmp / "controller.yaml"), "--node-heartbeat-timeout", "3",
                               "--agent-heartbeat-interval", "0.3"]).start()
    agent: Agent | None = None
    try:
        assert c.dashboard.startswith("https://127.0.0.1:"), c.dashboard
        cl = Cluster(c, admin, data / "pki", tokens)
        join_token = cl.ctl("token", "create").strip()
        res = run("-m", "sluicegate.agent.server", "join", "--controller", c.token_address, "--token", join_token,
                  "--ca-cert-hash", c.ca_hash, "--node-name", "node-a", "--data-dir", str(tmp / "agent-node-a"))
        assert res.returncode == 0, res.stderr
        agent = Agent(tmp, c.address, "node-a", allocatable="cpu=2,memory=2Gi").start()
        queues = tmp / "queues.yaml"
        queues.write_text(QUEUES)
        cl.ctl("apply", "-f", str(queues))
        yield cl
    finally:
        if agent is not None:
            agent.stop()
        c.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip(f"no browser: {CHROMIUM} and {CHROMEDRIVER} are missing (Debian's chromium and chromium-driver; "
                    "scripts/test installs them when run as root)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e .[test])")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
                # The cluster CA is not in the browser's store; Python's client checks the chain (test below).
                "--ignore-certificate-errors", "--window-size=1280,900"):
        opts.add_argument(arg)
    opts.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver: Any, what: str, pred: Any) -> Any:
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException, WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    def attempt(d: Any) -> Any:
        try:
            return pred(d)
        except WebDriverException as exc:
            # An element read while the page replaced it (a navigation after a submit): chromedriver says
            # so as an unknown error, not always as a stale element.  Read again at the next poll.
            if "does not belong to the document" in str(exc):
                return False
            raise

    try:
        return WebDriverWait(driver, DEADLINE, poll_frequency=0.1,
                             ignored_exceptions=(StaleElementReferenceException,)).until(attempt)
    except TimeoutException:
        raise AssertionError(f"timed out after {DEADLINE}s waiting for {what}; page:\n{driver.page_source[-3000:]}"
                             ) from None


def texts(driver: Any, css: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]


def log_in(driver: Any, cl: Cluster, user: str) -> None:
    from selenium.webdriver.common.by import By

    driver.delete_all_cookies()
    driver.get(cl.url + "login")
    driver.find_element(By.ID, "token").send_keys(cl.tokens[user])
    driver.find_element(By.ID, "submit").click()
    wait(driver, f"{user} logged in", lambda d: texts(d, "#who") == [user])


def open_view(driver: Any, cl: Cluster, hash_: str, ready_css: str) -> None:
    driver.get(cl.url + "#/" + hash_)
    wait(driver, f"view {hash_}", lambda d: texts(d, ready_css))


def cell(driver: Any, css: str) -> str:
    found = texts(driver, css)
    assert len(found) == 1, (css, found)
    return found[0]


def test_pages_show_what_the_api_says(cluster: Cluster, browser: Any) -> None:
    cl, d = cluster, browser
    cl.ctl("run", "-n", "team-a", "-q", "lq", "--name", "runs", "--cpu", "500m", "--", "sleep", "120")
    cl.ctl("run", "-n", "team-a", "-q", "lq", "--name", "too-big", "--cpu", "3", "--", "true")
    wait_for("runs running on node-a", lambda: [p["phase"] for p in
             cl.get("workload", "runs", "-n", "team-a")["status"].get("extra", {}).get("pods", [])] == ["Running"],
             timeout=DEADLINE)
    log_in(d, cl, "boss")

    # Queues: pending/reserving/admitted as the API's ClusterQueue and LocalQueue status.
    open_view(d, cl, "queues", "#clusterqueues tr[data-key='cq-a'] td.pending")
    for cq in cl.get("clusterqueues")["items"]:
        name, st = cq["metadata"]["name"], cq["status"]
        for col, key in (("pending", "pendingWorkloads"), ("reserving", "reservingWorkloads"),
                         ("admitted", "admittedWorkloads")):
            assert cell(d, f"#clusterqueues tr[data-key='{name}'] td.{col}") == str(st[key]), (name, col)
    for lq in cl.get("localqueues", "-A")["items"]:
        key = f"{lq['metadata']['namespace']}/{lq['metadata']['name']}"
        assert cell(d, f"#localqueues tr[data-key='{key}'] td.pending") == str(lq["status"]["pendingWorkloads"])
        assert cell(d, f"#localqueues tr[data-key='{key}'] td.admitted") == str(lq["status"]["admittedWorkloads"])
    assert cell(d, "#clusterqueues tr[data-key='cq-a'] td.pending") == "1"

    # Cohort tree: the queues under their cohort; usage and borrowing as the API reports them.
    open_view(d, cl, "cohorts", "li[data-key='cohort/org'] li[data-key='cq/cq-a']")
    for cq in cl.get("clusterqueues")["items"]:
        name = cq["metadata"]["name"]
        (res,) = [r for f in cq["status"]["flavorsReservation"] for r in f["resources"] if r["name"] == "cpu"]
        row = f"li[data-key='cq/{name}'] tr[data-key='default/cpu']"
        assert cell(d, f"{row} td.usage") == res["total"]
        assert cell(d, f"{row} td.borrowed") == res["borrowed"]
    assert cell(d, "li[data-key='cq/cq-b'] tr[data-key='default/cpu'] td.lending-limit") == "1"
    assert cell(d, "li[data-key='cq/cq-a'] tr[data-key='default/cpu'] td.nominal") == "1"

    # Nodes: allocatable and requested as the Nodes API has them, and measured usage.
    open_view(d, cl, "nodes", "#nodes tr[data-key='node-a'] td.name")
    (node,) = json.loads(cl.ctl("get", "nodes", "-o", "json"))["items"]
    want = f"cpu: {format_canonical('cpu', node['requested'].get('cpu', 0))} / " \
           f"{format_canonical('cpu', node['allocatable']['cpu'])}"
    assert cell(d, "#nodes tr[data-key='node-a'] div[data-resource='cpu']") == want == "cpu: 500m / 2"
    assert cell(d, "#nodes tr[data-key='node-a'] td.pods") == str(node["pods"])
    assert "Gi" in cell(d, "#nodes tr[data-key='node-a'] td.memory")

    # Workload list with filters, then a workload's detail: conditions and pod placement.
    open_view(d, cl, "workloads?namespace=team-a&state=Pending", "#workloads")
    wait(d, "the Pending filter", lambda x: texts(x, "#workloads td.name") == ["too-big"])
    open_view(d, cl, "workloads?text=run", "#workloads")
    wait(d, "the text filter", lambda x: texts(x, "#workloads td.name") == ["runs"])
    open_view(d, cl, "workload/team-a/runs", "#pods td.node")
    assert texts(d, "#pods td.node") == ["node-a"] and texts(d, "#pods td.phase") == ["Running"]
    api_conds = [c["type"] for c in cl.get("workload", "runs", "-n", "team-a")["status"]["conditions"]]
    assert sorted(texts(d, "#conditions tbody td:first-child")) == sorted(api_conds)
    assert "Admitted" in api_conds


def test_a_submission_appears_without_reload(cluster: Cluster, browser: Any) -> None:
    cl, d = cluster, browser
    log_in(d, cl, "boss")
    open_view(d, cl, "workloads?namespace=team-b", "#workload-count")
    d.execute_script("window.notReloaded = true;")
    assert "live" in texts(d, "#live") or wait(d, "the live stream", lambda x: texts(x, "#live") == ["live"])
    cl.ctl("run", "-n", "team-b", "-q", "lq", "--name", "fresh", "--cpu", "100m", "--", "true")
    wait(d, "the new workload's row", lambda x: "fresh" in texts(x, "#workloads td.name"))
    assert d.execute_script("return window.notReloaded === true;")
    open_view(d, cl, "queues", "#clusterqueues")
    d.execute_script("window.notReloaded = true;")
    before = int(cell(d, "#localqueues tr[data-key='team-b/lq'] td.pending"))
    cl.ctl("run", "-n", "team-b", "-q", "lq", "--name", "waits", "--cpu", "5", "--", "true")
    wait(d, "the pending count to rise", lambda x: texts(x, "#localqueues tr[data-key='team-b/lq'] td.pending")
         == [str(before + 1)])
    assert d.execute_script("return window.notReloaded === true;")


def test_user_text_is_shown_as_text(cluster: Cluster, browser: Any, tmp_path: Path) -> None:
    cl, d = cluster, browser
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
           "metadata": {"name": "odd", "namespace": "team-a", "annotations": {"note": XSS}},
           "spec": {"queueName": "lq", "active": False, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
               "containers": [{"name": "c", "command": ["true"], "resources": {"requests": {"cpu": "100m"}}}]}}}]}}
    (tmp_path / "odd.yaml").write_text(yaml.safe_dump(doc))
    cl.ctl("apply", "-f", str(tmp_path / "odd.yaml"))
    log_in(d, cl, "boss")
    open_view(d, cl, "workload/team-a/odd", "dd.annotations div")
    assert texts(d, "dd.annotations div") == [f"note: {XSS}"]
    assert d.execute_script("return window.pwned === undefined && document.querySelectorAll('main img').length === 0")


def test_a_namespace_viewer_sees_only_their_namespace(cluster: Cluster, browser: Any) -> None:
    cl, d = cluster, browser
    cl.ctl("run", "-n", "team-b", "-q", "lq", "--name", "b-secret", "--cpu", "100m", "--", "true")
    log_in(d, cl, "viewer")
    open_view(d, cl, "workloads", "#workloads")
    wait(d, "team-a's workloads", lambda x: "runs" in texts(x, "#workloads td.name"))
    namespaces = set(texts(d, "#workloads tbody td:first-child"))
    assert namespaces == {"team-a"}
    open_view(d, cl, "queues", "#localqueues td.name")
    assert [k.split("/")[0] for k in texts(d, "#localqueues tbody tr td:first-child")] == ["team-a"]
    # Direct requests for another namespace are refused and audited, as the API's are.
    status, _, body = cl.https("/api/workloads?namespace=team-b", token=cl.tokens["viewer"])
    assert status == 403 and 'may not list Workload in namespace "team-b"' in json.loads(body)["error"]
    status, _, body = cl.https("/api/workloads/team-b/b-secret", token=cl.tokens["viewer"])
    assert status == 403 and "b-secret" not in body.decode()


def test_unauthenticated_requests_are_refused(cluster: Cluster, browser: Any) -> None:
    cl, d = cluster, browser
    d.delete_all_cookies()
    d.get(cl.url)
    wait(d, "the login page", lambda x: texts(x, "#submit") == ["Log in"])
    assert "no client certificate and no bearer token" in texts(d, "#message")[0]
    from selenium.webdriver.common.by import By

    d.find_element(By.ID, "token").send_keys("not-a-token")
    d.find_element(By.ID, "submit").click()
    wait(d, "the refusal", lambda x: "bearer token is not known" in " ".join(texts(x, "#message")))
    assert d.get_cookies() == []

    for path in ("/", "/api/session", "/api/workloads", "/api/events"):
        status, headers, _ = cl.https(path)
        assert status == 401, path
        assert headers["X-Frame-Options"] == "DENY" and "default-src 'self'" in headers["Content-Security-Policy"]
    assert cl.https("/api/nodes", token="wrong")[0] == 401
    # A bearer token or the admin's client certificate (verified against the cluster CA both ways).
    assert json.loads(cl.https("/api/session", token=cl.tokens["boss"])[2])["user"] == "boss"
    session = json.loads(cl.https("/api/session", cert=True)[2])
    admin_cert = pki.load_cert(yaml.safe_load(cl.admin.read_text())["clientCertificate"].encode())
    assert (session["method"], session["user"]) == ("certificate", pki.info(admin_cert).common_name)
    # The login cookie: HttpOnly, Secure, SameSite=Strict.
    log_in(d, cl, "boss")
    (cookie,) = d.get_cookies()
    assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict"


def test_no_browser_needed_for_plaintext_loopback(tmp_path: Path) -> None:
    """Without pkiDir: plain HTTP on loopback, no login, and a Host other than loopback refused."""
    c = Controller(tmp_path, extra=["--no-placement"]).start()
    try:
        assert c.dashboard.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(c.dashboard + "api/session", timeout=10) as r:
            assert json.loads(r.read())["user"] == "system:anonymous"
        req = urllib.request.Request(c.dashboard + "api/session", headers={"Host": "attacker.example:80"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 421
    finally:
        assert c.stop() == 0
    res = run("-m", "sluicegate.controller.server", "--store", str(tmp_path / "c2.db"), "--listen", "127.0.0.1:0",
              "--health-listen", "127.0.0.1:0", "--dashboard-listen", "0.0.0.0:0")
    assert res.returncode == 2 and "dashboardListen: 0.0.0.0:0 is not a loopback address" in res.stderr

