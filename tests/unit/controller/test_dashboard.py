"""The dashboard's views and HTTP side on a real Manager (no browser; see tests/integration/test_dashboard.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from sluicegate.controller.dashboard import DashboardError, start_dashboard, views
from sluicegate.controller.dashboard.app import Dashboard
from sluicegate.controller.manager import Manager
from sluicegate.controller.service.gate import Gate
from sluicegate.controller.settings import SettingsError, load_settings
from sluicegate.controller.status import cluster_queue_status
from sluicegate.model.names import ClusterQueueName

from .test_manager import manager, settle, workload


def test_tree_and_workload_views_agree_with_the_queue_status() -> None:
    m = manager()
    for name, cpu in (("filler", "3"), ("big", "2"), ("small", "1")):
        m.create_workload(workload(name, cpu))
    settle(m)
    (cq,) = views.tree(m)["clusterQueues"]
    st = cluster_queue_status(m.cache, ClusterQueueName("cq"))
    assert (cq["pending"], cq["admitted"]) == (st["pendingWorkloads"], st["admittedWorkloads"]) == (1, 2)
    (row,) = cq["resources"]
    assert (row["flavor"], row["resource"], row["usage"]["text"], row["nominal"]["text"]) == ("default", "cpu", "4", "4")
    assert row["borrowed"]["value"] == 0 and row["borrowingLimit"] is None

    listed = views.workloads(m, None)
    assert [w["name"] for w in listed["items"]] == ["small", "big", "filler"]  # newest first
    assert [w["name"] for w in views.workloads(m, None, state="Pending")["items"]] == ["big"]
    assert [w["name"] for w in views.workloads(m, None, text="FILL")["items"]] == ["filler"]
    assert views.workloads(m, None, queue="cq")["total"] == 3 and views.workloads(m, None, queue="other")["total"] == 0
    assert views.workloads(m, frozenset({"team-a"}))["total"] == 0  # another namespace's viewer sees none
    big = views.workload_detail(m, m.get_workload("default", "big"))
    assert big["state"] == "Pending" and big["clusterQueue"] == "cq" and big["admission"] is None
    assert big["conditions"][-1]["message"] == big["message"]


@pytest.fixture
async def served() -> AsyncIterator[tuple[Manager, Dashboard, list[Manager | None]]]:
    m = manager()
    current: list[Manager | None] = [m]
    d = await start_dashboard(listen="127.0.0.1:0", manager=lambda: current[0], gate=Gate(), ssl_context=None,
                              leader=lambda: "10.0.0.7:7420")
    try:
        yield m, d, current
    finally:
        await d.stop()


async def test_security_headers_and_a_loopback_host_only(served: tuple[Manager, Dashboard, list[Manager | None]]) -> None:
    _, d, _ = served
    async with aiohttp.ClientSession() as s:
        async with s.get(d.url + "static/app.js") as r:
            assert r.status == 200 and r.content_type == "text/javascript"
            assert r.headers["X-Frame-Options"] == "DENY" and r.headers["X-Content-Type-Options"] == "nosniff"
            assert "script-src 'self'" in r.headers["Content-Security-Policy"]
            script = await r.text()
            assert [s for s in (".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write", "eval(")
                    if s in script] == []
        async with s.get(d.url + "api/tree", headers={"Host": "rebound.example"}) as r:
            assert r.status == 421
        async with s.get(d.url + "api/tree", headers={"Host": "localhost:1"}) as r:
            assert r.status == 200
        async with s.post(d.url + "login", data={"token": "t"}, headers={"Origin": "https://elsewhere.example"}) as r:
            assert r.status == 403 and await r.text() == "cross-site login refused\n"
        async with s.post(d.url + "login", data={"token": "t"}, headers={"Origin": d.url.rstrip("/")}) as r:
            assert r.status == 400  # same site; logging in needs TLS
        async with s.post(d.url + "login", data={"token": "t"}, headers={"Sec-Fetch-Site": "cross-site"}) as r:
            assert r.status == 403


async def test_a_follower_says_who_leads(served: tuple[Manager, Dashboard, list[Manager | None]]) -> None:
    _, d, current = served
    current[0] = None
    async with aiohttp.ClientSession() as s:
        async with s.get(d.url + "api/tree") as r:
            assert r.status == 503
            assert await r.json() == {"error": "this controller is a follower: the leader serves the dashboard",
                                      "role": "follower", "leader": "10.0.0.7:7420"}
        async with s.get(d.url + "api/session") as r:
            body = await r.json()
            assert (body["role"], body["leader"], body["user"]) == ("follower", "10.0.0.7:7420", "system:anonymous")


async def test_live_events_follow_the_watch_stream_and_end_with_the_dashboard(
    served: tuple[Manager, Dashboard, list[Manager | None]],
) -> None:
    m, d, _ = served
    async with aiohttp.ClientSession() as s, s.get(d.url + "api/events") as r:
        assert r.headers["Content-Type"] == "text/event-stream"
        assert await asyncio.wait_for(r.content.readline(), 5) == b"retry: 2000\n"
        await asyncio.wait_for(r.content.readline(), 5)
        # The watcher is registered once the stream's first read is under way.
        for _ in range(200):
            if m.commit.watchers:
                break
            await asyncio.sleep(0.01)
        m.create_workload(workload("live", "1"))
        assert await asyncio.wait_for(r.content.readline(), 5) == b"event: workloads\n"
        data = (await asyncio.wait_for(r.content.readline(), 5)).decode()
        (ev,) = json.loads(data.removeprefix("data: "))
        assert (ev["type"], ev["namespace"], ev["name"], ev["state"]) == ("ADDED", "default", "live", "Pending")
        await asyncio.wait_for(d.stop(), 5)  # an open stream does not hold shutdown up
        assert await asyncio.wait_for(r.content.read(), 5) in (b"", b"\n")
    assert not m.commit.watchers


async def test_plaintext_on_a_routable_address_needs_insecure() -> None:
    with pytest.raises(DashboardError, match="dashboardListen: 0.0.0.0:0 is not a loopback address"):
        await start_dashboard(listen="0.0.0.0:0", manager=lambda: None, gate=Gate(), ssl_context=None)
    with pytest.raises(DashboardError, match="dashboardListen: expected HOST:PORT"):
        await start_dashboard(listen="nowhere", manager=lambda: None, gate=Gate(), ssl_context=None)


def test_the_setting(tmp_path: Path) -> None:
    assert load_settings(None, {}).dashboard_listen == "127.0.0.1:7425"
    assert load_settings(None, {"dashboard_listen": ""}).dashboard_listen == ""
    with pytest.raises(SettingsError, match="dashboardListen: 10.1.2.3:7425 is not a loopback address"):
        load_settings(None, {"dashboard_listen": "10.1.2.3:7425"})
    assert load_settings(None, {"dashboard_listen": "10.1.2.3:7425", "insecure": True}).dashboard_listen
    f = tmp_path / "c.yaml"
    f.write_text("dashboardListen: 7425\n")
    with pytest.raises(SettingsError, match="dashboardListen: expected a string"):
        load_settings(str(f), {})


async def test_https_client_certificates_and_a_renewed_serving_certificate(tmp_path: Path) -> None:
    """CERT_OPTIONAL: a cluster certificate names the user, none gets 401, a revoked one too; renewal is picked up."""
    import os
    import ssl

    from sluicegate.controller.dashboard import serving_context
    from sluicegate.security import pki
    from sluicegate.security.authn import ClusterAuthenticator
    from sluicegate.security.authority import Authority, init_pki, issue_server_cert

    pki_dir = tmp_path / "pki"
    init_pki(pki_dir)
    authority = Authority(pki_dir)
    key = pki.new_key()
    cert = authority.issue_user("alice", ("system:masters",), key.public_key())
    (tmp_path / "alice.pem").write_bytes(pki.key_pem(key) + pki.cert_pem(cert))
    gate = Gate(ClusterAuthenticator(is_revoked=authority.is_revoked))
    m = manager()
    d = await start_dashboard(listen="127.0.0.1:0", manager=lambda: m, gate=gate,
                              ssl_context=serving_context(str(pki_dir)))
    assert d.url.startswith("https://127.0.0.1:")

    def client(with_cert: bool) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
        if with_cert:
            ctx.load_cert_chain(str(tmp_path / "alice.pem"))
        return ctx

    async def session(with_cert: bool) -> tuple[int, dict[str, object]]:
        conn = aiohttp.TCPConnector(ssl=client(with_cert), force_close=True)
        async with aiohttp.ClientSession(connector=conn) as s, s.get(d.url + "api/session") as r:
            return r.status, await r.json()

    async def serving_serial() -> int:
        host, port = d.url.removeprefix("https://").rstrip("/").rsplit(":", 1)
        pem = await asyncio.to_thread(ssl.get_server_certificate, (host, int(port)))
        return pki.load_cert(pem.encode()).serial_number

    try:
        status, body = await session(True)
        assert (status, body["user"], body["method"]) == (200, "alice", "certificate")
        first = await serving_serial()
        status, body = await session(False)
        assert status == 401 and "no client certificate and no bearer token" in str(body["error"])

        renewed = issue_server_cert(pki_dir)
        later = os.stat(pki_dir / "server.crt").st_mtime + 10  # a clock tick the check cannot miss
        os.utime(pki_dir / "server.crt", (later, later))
        assert await serving_serial() == renewed.serial_number != first
        assert (await session(True))[0] == 200

        authority.revoke_serial(format(cert.serial_number, "x"))
        status, body = await session(True)
        assert status == 401 and "has been revoked" in str(body["error"])
    finally:
        await d.stop()
