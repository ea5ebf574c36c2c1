"""The operator HTTP port: liveness, readiness, metrics, and JSON views.

Routes (all GET):

* ``/livez`` and its alias ``/healthz``: 200 ``ok`` whenever the event loop
  answers. A wedged loop answers nothing, which is the signal.
* ``/readyz``: 200 ``{"ready": true, "reason": ...}`` while the readiness
  callback says so, else 503 ``{"ready": false, "reason": ...}``. Once
  shutdown begins (``mark_stopping``) it answers 503 whatever the callback
  says, so load balancers and probes stop sending work first.
* ``/metrics``: the registry in the Prometheus text format (prometheus_client's);
  the label sets that changed since the last scrape are written first in
  slices of a few milliseconds, with the event loop running between them.
* any extra JSON routes the daemon registers (the agent adds ``/pods``).

The server is an aiohttp ``AppRunner`` without its own signal handling (the
supervisor owns SIGTERM/SIGINT) plus one ``TCPSite``, and it is always torn
down by ``stop()``, which ``async with`` calls on every way out.
"""

from __future__ import annotations

import inspect
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, TypeAlias

from aiohttp import web
from prometheus_client import CollectorRegistry

from sluicegate.common.metrics import CONTENT_TYPE, Registry, render

__all__ = [
    "DEFAULT_HOST",
    "HealthBindError",
    "HealthServer",
    "JsonHandler",
    "JsonValue",
    "ReadinessCheck",
]

logger = logging.getLogger(__name__)

# Loopback by default: these routes expose pod details and metrics without
# authentication, so reaching them from elsewhere is an operator's choice.
DEFAULT_HOST: Final = "127.0.0.1"

# Probe requests are tiny; a second is plenty to finish one in flight, and a
# longer wait would only eat into the shutdown budget below TimeoutStopSec.
DEFAULT_SHUTDOWN_TIMEOUT: Final = 1.0

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"

JsonHandler: TypeAlias = Callable[[], "JsonValue | Awaitable[JsonValue]"]
"""Produces the body of an extra JSON route. It runs on the event loop for
every request, so it should read in-memory state and return quickly."""

ReadinessCheck: TypeAlias = Callable[[], tuple[bool, str]]
"""Returns (ready, reason); the reason is shown to whoever probes either way."""

_BUILTIN_ROUTES: Final = frozenset({"/livez", "/healthz", "/readyz", "/metrics"})


class HealthBindError(Exception):
    """The health server could not listen on the configured address."""

    def __init__(self, *, host: str, port: int, problem: str) -> None:
        self.host = host
        self.port = port
        self.problem = problem
        super().__init__(
            f"cannot serve health/metrics HTTP on {host}:{port}: {problem}; "
            f"the daemon stops. Free the port or change the health listen address in its config."
        )


class HealthServer:
    """The health/metrics HTTP server of one daemon.

    Use ``async with HealthServer(...) as server`` (or ``start``/``stop`` in
    a ``try``/``finally``); ``server.address`` is the bound (host, port), which
    matters when port 0 asked the kernel to pick one.
    """

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        readiness: ReadinessCheck,
        host: str = DEFAULT_HOST,
        port: int = 0,
        json_routes: Mapping[str, JsonHandler] | None = None,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
    ) -> None:
        try:
            # A literal address, not a name: a name can resolve to several
            # addresses, and with port 0 each would get a different port.
            ipaddress.ip_address(host)
        except ValueError:
            raise HealthBindError(
                host=host, port=port, problem="the host is not a literal IP address"
            ) from None
        routes = dict(json_routes or {})
        for path in routes:
            if not path.startswith("/") or path in _BUILTIN_ROUTES:
                raise ValueError(
                    f"extra health route {path!r} must start with '/' and not be "
                    f"one of {sorted(_BUILTIN_ROUTES)}"
                )
        self._registry = registry
        self._readiness = readiness
        self._host = host
        self._port = port
        self._json_routes = routes
        self._shutdown_timeout = shutdown_timeout
        self._runner: web.AppRunner | None = None
        self._address: tuple[str, int] | None = None
        self._stopping_reason: str | None = None

    @property
    def address(self) -> tuple[str, int]:
        if self._address is None:
            raise RuntimeError("the health server has not been started")
        return self._address

    def mark_stopping(self, reason: str = "shutting down") -> None:
        """Answer /readyz with 503 from now on: the first step of shutdown."""
        self._stopping_reason = reason

    async def start(self) -> tuple[str, int]:
        """Bind and serve; returns the bound (host, port)."""
        if self._runner is not None:
            raise RuntimeError("the health server is already started")
        app = web.Application()
        app.router.add_get("/livez", self._live)
        app.router.add_get("/healthz", self._live)
        app.router.add_get("/readyz", self._ready)
        app.router.add_get("/metrics", self._metrics)
        for path, handler in self._json_routes.items():
            app.router.add_get(path, self._json_route(handler))
        # Probes arrive every few seconds; an access log line for each would
        # bury everything else in the journal.
        runner = web.AppRunner(
            app, handle_signals=False, access_log=None, shutdown_timeout=self._shutdown_timeout
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self._host, self._port)
            await site.start()
        except OSError as error:
            await runner.cleanup()
            raise HealthBindError(host=self._host, port=self._port, problem=str(error)) from error
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        sockname = runner.addresses[0]
        self._address = (str(sockname[0]), int(sockname[1]))
        logger.info("serving health and metrics on http://%s:%d", *self._address)
        return self._address

    async def stop(self) -> None:
        """Stop listening, let requests in flight finish briefly, and release the port."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> HealthServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _live(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _ready(self, request: web.Request) -> web.Response:
        if self._stopping_reason is not None:
            ready, reason = False, self._stopping_reason
        else:
            try:
                ready, reason = self._readiness()
            except Exception as error:
                logger.exception("readiness check raised; answering /readyz with 503")
                ready, reason = False, f"readiness check raised {type(error).__name__}: {error}"
        return web.json_response({"ready": ready, "reason": reason}, status=200 if ready else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        if isinstance(self._registry, Registry):
            await self._registry.flush()  # in slices: the loop keeps scheduling while a big scrape is written
        return web.Response(body=render(self._registry), headers={"Content-Type": CONTENT_TYPE})

    @staticmethod
    def _json_route(handler: JsonHandler) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def serve(request: web.Request) -> web.Response:
            body = handler()
            if inspect.isawaitable(body):
                body = await body
            return web.json_response(body)

        return serve
