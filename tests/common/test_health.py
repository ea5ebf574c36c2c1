"""The health/metrics HTTP server, started for real on 127.0.0.1 and queried over HTTP."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter

from sluicegate.common.health import HealthBindError, HealthServer, JsonHandler, JsonValue
from sluicegate.common.metrics import CONTENT_TYPE

TIMEOUT = aiohttp.ClientTimeout(total=5)


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    content_type: str
    body: str


async def _get(address: tuple[str, int], path: str) -> Reply:
    host, port = address
    async with (
        aiohttp.ClientSession(timeout=TIMEOUT) as session,
        session.get(f"http://{host}:{port}{path}") as response,
    ):
        return Reply(response.status, response.headers["Content-Type"], await response.text())


async def _get_json(address: tuple[str, int], path: str) -> tuple[int, JsonValue]:
    host, port = address
    async with (
        aiohttp.ClientSession(timeout=TIMEOUT) as session,
        session.get(f"http://{host}:{port}{path}") as response,
    ):
        assert response.headers["Content-Type"] == "application/json; charset=utf-8"
        body: JsonValue = await response.json()
        return response.status, body


def _port_is_closed(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except ConnectionRefusedError:
        return True


def _ready() -> tuple[bool, str]:
    return True, "store loaded, 3 nodes connected"


def _server(
    *,
    readiness: Callable[[], tuple[bool, str]] = _ready,
    registry: CollectorRegistry | None = None,
    json_routes: Mapping[str, JsonHandler] | None = None,
    port: int = 0,
) -> HealthServer:
    return HealthServer(
        registry=registry or CollectorRegistry(),
        readiness=readiness,
        host="127.0.0.1",
        port=port,
        json_routes=json_routes,
    )


@pytest.fixture
async def server() -> AsyncIterator[HealthServer]:
    async with _server() as running:
        yield running


async def test_start_returns_the_bound_address() -> None:
    server = _server()
    try:
        host, port = await server.start()
        assert (host, port > 0, server.address) == ("127.0.0.1", True, (host, port))
    finally:
        await server.stop()
    assert _port_is_closed(port)


@pytest.mark.parametrize("path", ["/livez", "/healthz"])
async def test_liveness(server: HealthServer, path: str) -> None:
    assert await _get(server.address, path) == Reply(200, "text/plain; charset=utf-8", "ok")


def _boom() -> tuple[bool, str]:
    raise RuntimeError("cache lock poisoned")


@pytest.mark.parametrize(
    ("readiness", "status", "body"),
    [
        pytest.param(_ready, 200, {"ready": True, "reason": "store loaded, 3 nodes connected"}, id="ready"),
        pytest.param(
            lambda: (False, "store not loaded yet"),
            503,
            {"ready": False, "reason": "store not loaded yet"},
            id="not",
        ),
        pytest.param(
            _boom,
            503,
            {"ready": False, "reason": "readiness check raised RuntimeError: cache lock poisoned"},
            id="raises",
        ),
    ],
)
async def test_readiness(readiness: Callable[[], tuple[bool, str]], status: int, body: JsonValue) -> None:
    async with _server(readiness=readiness) as server:
        assert await _get_json(server.address, "/readyz") == (status, body)


async def test_stopping_turns_readiness_off_but_not_liveness(server: HealthServer) -> None:
    assert (await _get_json(server.address, "/readyz"))[0] == 200
    server.mark_stopping("received SIGTERM")
    assert await _get_json(server.address, "/readyz") == (503, {"ready": False, "reason": "received SIGTERM"})
    assert await _get(server.address, "/livez") == Reply(200, "text/plain; charset=utf-8", "ok")


async def test_metrics_are_the_registry_rendered_live() -> None:
    registry = CollectorRegistry()
    scrapes = Counter("probe_scrapes_total", "Scrapes seen by the test.", registry=registry)
    async with _server(registry=registry) as server:
        first = await _get(server.address, "/metrics")
        scrapes.inc()
        second = await _get(server.address, "/metrics")
    assert (first.status, first.content_type, second.status, second.content_type) == (
        200, CONTENT_TYPE, 200, CONTENT_TYPE)
    assert "probe_scrapes_total 0.0\n" in first.body
    assert "probe_scrapes_total 1.0\n" in second.body


async def test_extra_json_routes_sync_and_async() -> None:
    pods: list[JsonValue] = [{"name": "train-0", "phase": "Running"}]

    async def version() -> JsonValue:
        await asyncio.sleep(0)  # a real suspension point, as an async handler would have
        return {"version": "0.1.0"}

    routes: dict[str, JsonHandler] = {"/pods": lambda: pods, "/version": version}
    async with _server(json_routes=routes) as server:
        assert await _get_json(server.address, "/pods") == (200, [{"name": "train-0", "phase": "Running"}])
        pods.append({"name": "train-1", "phase": "Pending"})
        assert await _get_json(server.address, "/pods") == (
            200,
            [{"name": "train-0", "phase": "Running"}, {"name": "train-1", "phase": "Pending"}],
        )
        assert await _get_json(server.address, "/version") == (200, {"version": "0.1.0"})
        assert (await _get(server.address, "/nothing-here")).status == 404


async def test_port_is_released_when_the_block_raises() -> None:
    port = 0
    with pytest.raises(RuntimeError, match="daemon setup failed"):
        async with _server() as server:
            port = server.address[1]
            assert (await _get(server.address, "/livez")).status == 200
            raise RuntimeError("daemon setup failed")
    assert _port_is_closed(port)
    # Released for real: a new server can take the same fixed port at once.
    async with _server(port=port) as again:
        assert again.address == ("127.0.0.1", port)


async def test_busy_port_is_a_bind_error() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = _server(port=port)
        with pytest.raises(HealthBindError) as caught:
            await server.start()
    assert (caught.value.host, caught.value.port, "in use" in caught.value.problem) == (
        "127.0.0.1",
        port,
        True,
    )
    with pytest.raises(RuntimeError, match="has not been started"):
        _ = server.address


@pytest.mark.parametrize("host", ["localhost", "health.example"])
def test_host_must_be_a_literal_address(host: str) -> None:
    with pytest.raises(HealthBindError) as caught:
        HealthServer(registry=CollectorRegistry(), readiness=_ready, host=host, port=7421)
    assert (caught.value.host, caught.value.port, caught.value.problem) == (
        host,
        7421,
        "the host is not a literal IP address",
    )


@pytest.mark.parametrize("path", ["pods", "/metrics", "/readyz"])
def test_extra_route_must_not_clash(path: str) -> None:
    handler: Callable[[], JsonValue | Awaitable[JsonValue]] = lambda: []  # noqa: E731
    with pytest.raises(ValueError, match=f"extra health route '{path}'"):
        _server(json_routes={path: handler})
