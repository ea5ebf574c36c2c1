"""The dashboard's HTTP side: pages, JSON under /api/, live events, and start/stop.

Read-only.  Every /api/ request is authenticated like an API call and
authorised by the gate as ``list``/``get``/``watch`` of the kinds it shows,
so a namespace viewer sees their namespaces only.  The pages are static
files (HTML, one script, one stylesheet) that fetch the JSON; the script
builds the DOM with text nodes only, and the Content-Security-Policy allows
no inline script, so a workload named ``<script>`` stays text.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import logging
import ssl
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection
from importlib import resources
from typing import Any

from aiohttp import web

from sluicegate.common.netaddr import AddressError, is_loopback, split_hostport
from sluicegate.controller.dashboard import views
from sluicegate.controller.dashboard.access import (
    TOKEN_COOKIE,
    RequestContext,
    authenticate,
    host_is_loopback,
)
from sluicegate.controller.errors import ControllerError, NotFound, PermissionDenied
from sluicegate.controller.manager import Manager, workload_state
from sluicegate.controller.service.gate import Gate
from sluicegate.security.identity import Principal, Unauthenticated

log = logging.getLogger(__name__)

# Security headers on every response.  No inline script or style anywhere: 'self' only.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: with no-referrer a browser's form POST says "Origin: null".
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
# Live events: a comment line this often keeps proxies from closing an idle stream and notices a lost manager.
KEEPALIVE_SECONDS = 15.0
# Events sent to one browser per message (a burst of submissions is one SSE message per batch).
MAX_EVENT_BATCH = 200
_STATIC = {"app.js": "text/javascript", "style.css": "text/css"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _static(name: str) -> bytes:
    return resources.files("sluicegate.controller.dashboard").joinpath("static", name).read_bytes()


class Dashboard:
    """A running dashboard: ``url`` is where it listens; ``await stop()`` ends it."""

    def __init__(
        self, *, manager: Callable[[], Manager | None], gate: Gate, tls: bool,
        leader: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.manager = manager
        self.gate = gate
        self.tls = tls
        self.leader = leader
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()
        self._files = {name: _static(name) for name in (*_STATIC, "index.html", "login.html")}

    # ------------------------------------------------------------ app

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._headers])
        r = app.router
        r.add_get("/", self._index)
        r.add_get("/login", self._login_form)
        r.add_post("/login", self._login)
        r.add_post("/logout", self._logout)
        for name in _STATIC:
            r.add_get(f"/static/{name}", self._file(name))
        r.add_get("/api/session", self._api(self._session, needs_manager=False))
        r.add_get("/api/tree", self._api(self._tree))
        r.add_get("/api/localqueues", self._api(self._local_queues))
        r.add_get("/api/workloads", self._api(self._workloads))
        r.add_get("/api/workloads/{namespace}/{name}", self._api(self._workload))
        r.add_get("/api/nodes", self._api(self._nodes))
        r.add_get("/api/events", self._events)
        return app

    @web.middleware
    async def _headers(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not self.tls and not host_is_loopback(request):
            resp: web.StreamResponse = web.Response(
                status=421, text="this dashboard answers only to a loopback Host (localhost, 127.0.0.1, [::1])\n")
        else:
            try:
                resp = await handler(request)
            except web.HTTPException as exc:
                resp = exc
        for k, v in SECURITY_HEADERS.items():
            resp.headers.setdefault(k, v)
        return resp

    def _file(self, name: str) -> Handler:
        body, ctype = self._files[name], _STATIC[name]

        async def serve(request: web.Request) -> web.StreamResponse:
            return web.Response(body=body, content_type=ctype, charset="utf-8")

        return serve

    # ------------------------------------------------------------ pages and login

    def _login_page(self, message: str, status: int) -> web.Response:
        text = self._files["login.html"].decode()
        note = html.escape(message) if message else ""
        if not self.tls:
            note = "Logging in needs TLS (pkiDir); without it this loopback dashboard needs no login."
        return web.Response(text=text.replace("{{message}}", note), status=status, content_type="text/html")

    async def _index(self, request: web.Request) -> web.StreamResponse:
        try:
            authenticate(self.gate, request)
        except Unauthenticated as exc:
            return self._login_page(str(exc), 401)
        return web.Response(body=self._files["index.html"], content_type="text/html", charset="utf-8")

    async def _login_form(self, request: web.Request) -> web.StreamResponse:
        return self._login_page("", 200)

    @staticmethod
    def _cross_site(request: web.Request) -> bool:
        """A form posted from another site: refused, so that no page elsewhere can log a visitor in under
        its own token.  Browsers say where a request comes from in Sec-Fetch-Site, older ones in Origin."""
        site = request.headers.get("Sec-Fetch-Site")
        if site is not None:
            return site not in ("same-origin", "none")
        origin = request.headers.get("Origin")
        return origin is not None and origin != f"{request.scheme}://{request.host}"

    async def _login(self, request: web.Request) -> web.StreamResponse:
        if self._cross_site(request):
            return web.Response(status=403, text="cross-site login refused\n")
        if not self.tls:
            return self._login_page("", 400)
        form = await request.post()
        token = str(form.get("token", "")).strip()
        if not token:
            return self._login_page("token: enter the bearer token you were given", 401)
        try:  # the token alone, as the token port would check it
            authenticate(self.gate, request, token=token)
        except Unauthenticated as exc:
            return self._login_page(str(exc), 401)
        resp = web.HTTPSeeOther("/")
        resp.set_cookie(TOKEN_COOKIE, token, httponly=True, secure=True, samesite="Strict", path="/")
        return resp

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        if self._cross_site(request):
            return web.Response(status=403, text="cross-site logout refused\n")
        resp = web.HTTPSeeOther("/login")
        resp.del_cookie(TOKEN_COOKIE, path="/")
        return resp

    # ------------------------------------------------------------ JSON

    def _api(
        self, build: Callable[[web.Request, Principal, Manager | None], Any], *, needs_manager: bool = True,
    ) -> Handler:
        async def serve(request: web.Request) -> web.StreamResponse:
            try:
                p = authenticate(self.gate, request)
                m = self.manager()
                if m is None and needs_manager:
                    return web.json_response(self._follower(), status=503)
                return web.json_response(build(request, p, m))
            except Unauthenticated as exc:
                return web.json_response({"error": str(exc)}, status=401)
            except PermissionDenied as exc:
                return web.json_response({"error": str(exc)}, status=403)
            except NotFound as exc:
                return web.json_response({"error": str(exc)}, status=404)
            except ControllerError as exc:
                return web.json_response({"error": str(exc)}, status=400)

        return serve

    def _follower(self) -> dict[str, Any]:
        leader = self.leader()
        return {"error": "this controller is a follower: the leader serves the dashboard",
                "role": "follower", "leader": leader or ""}

    def _authorize(self, request: web.Request, p: Principal, verb: str, kind: str, namespace: str = "",
                   name: str = "") -> None:
        self.gate.authorize(p, verb, kind, namespace, name, RequestContext(request))

    def _visible(
        self, request: web.Request, p: Principal, verb: str, kind: str, namespace: str,
    ) -> frozenset[str] | None:
        """The namespaces the caller may ``verb`` ``kind`` in (None: all); PermissionDenied if none."""
        if namespace:
            self._authorize(request, p, verb, kind, namespace)
            return frozenset({namespace})
        visible = self.gate.visible(p, verb, kind)
        if visible is not None and not visible:
            self._authorize(request, p, verb, kind)  # raises, audited
        return visible

    def _session(self, request: web.Request, p: Principal, m: Manager | None) -> dict[str, Any]:
        return {"user": p.user, "groups": sorted(p.groups), "method": p.method, "tls": self.tls,
                "role": "leader" if m is not None else "follower", "leader": self.leader() or ""}

    def _tree(self, request: web.Request, p: Principal, m: Manager | None) -> dict[str, Any]:
        assert m is not None
        self._authorize(request, p, "list", "ClusterQueue")
        self._authorize(request, p, "list", "Cohort")
        return views.tree(m)

    def _local_queues(self, request: web.Request, p: Principal, m: Manager | None) -> list[dict[str, Any]]:
        assert m is not None
        return views.local_queues(m, self._visible(request, p, "list", "LocalQueue", ""))

    def _workloads(self, request: web.Request, p: Principal, m: Manager | None) -> dict[str, Any]:
        assert m is not None
        q = request.query
        ns = q.get("namespace", "")
        return views.workloads(m, self._visible(request, p, "list", "Workload", ns), namespace=ns,
                               queue=q.get("queue", ""), state=q.get("state", ""), text=q.get("text", ""))

    def _workload(self, request: web.Request, p: Principal, m: Manager | None) -> dict[str, Any]:
        assert m is not None
        ns, name = request.match_info["namespace"], request.match_info["name"]
        self._authorize(request, p, "get", "Workload", ns, name)
        return views.workload_detail(m, m.get_workload(ns, name))

    def _nodes(self, request: web.Request, p: Principal, m: Manager | None) -> list[dict[str, Any]]:
        assert m is not None
        self._authorize(request, p, "list", "Node")
        return views.nodes(m)

    # ------------------------------------------------------------ live events

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """Server-Sent Events: one ``workloads`` message per batch of watch events the caller may see."""
        try:
            p = authenticate(self.gate, request)
            visible = self._visible(request, p, "watch", "Workload", "")
        except Unauthenticated as exc:
            return web.json_response({"error": str(exc)}, status=401)
        except PermissionDenied as exc:
            return web.json_response({"error": str(exc)}, status=403)
        m = self.manager()
        if m is None:
            return web.json_response(self._follower(), status=503)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"})
        await resp.prepare(request)
        await resp.write(b"retry: 2000\n\n")
        async with contextlib.aclosing(self._batches(m, visible)) as batches:
            async for batch in batches:
                if batch is None:
                    await resp.write(b": keepalive\n\n")
                    if self.manager() is not m:  # a takeover built another Manager: the browser reconnects
                        break
                    continue
                data = json.dumps(batch, separators=(",", ":"))
                await resp.write(f"event: workloads\ndata: {data}\n\n".encode())
        return resp

    async def _batches(
        self, m: Manager, visible: Collection[str] | None,
    ) -> AsyncGenerator[list[dict[str, Any]] | None, None]:
        """Event summaries as they come, None at each keepalive; ends when the dashboard closes."""
        # An async generator: aclose() ends the watch.
        stream = m.watch_batches("", "", False, max_batch=MAX_EVENT_BATCH, namespaces=visible)
        closing = asyncio.ensure_future(self._closing.wait())
        nxt: asyncio.Future[Any] | None = None
        try:
            while not self._closing.is_set():
                if nxt is None:
                    nxt = asyncio.ensure_future(anext(stream))
                done, _ = await asyncio.wait({nxt, closing}, timeout=KEEPALIVE_SECONDS,
                                             return_when=asyncio.FIRST_COMPLETED)
                if nxt not in done:
                    if not self._closing.is_set():
                        yield None
                    continue
                events, nxt = nxt.result(), None
                yield [{"type": ev.type, "namespace": ev.workload.namespace, "name": ev.workload.name,
                        "state": workload_state(ev.workload), "resourceVersion": ev.resource_version}
                       for ev in events]
        except StopAsyncIteration:
            return
        finally:
            closing.cancel()
            if nxt is not None:
                nxt.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
                    await nxt
            await stream.aclose()

    # ------------------------------------------------------------ lifecycle

    async def start(self, listen: str, ssl_context: ssl.SSLContext | None) -> str:
        host, port = split_hostport(listen, key="dashboardListen")  # checked by start_dashboard
        runner = web.AppRunner(self.app(), handle_signals=False, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise DashboardError(f"dashboardListen: cannot serve the dashboard on {listen}: {exc}") from exc
        self._runner = runner
        bound = runner.addresses[0]
        shown = f"[{bound[0]}]" if ":" in str(bound[0]) else str(bound[0])
        self.url = f"{'https' if ssl_context else 'http'}://{shown}:{bound[1]}/"
        return self.url

    async def stop(self) -> None:
        self._closing.set()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


class DashboardError(Exception):
    """The dashboard cannot start; the message names the setting."""


async def start_dashboard(
    *, listen: str, manager: Callable[[], Manager | None], gate: Gate, ssl_context: ssl.SSLContext | None,
    insecure: bool = False, leader: Callable[[], str | None] = lambda: None,
) -> Dashboard:
    """Serve the dashboard on ``listen`` (HOST:PORT, port 0 picks one); ``await d.stop()`` ends it.

    ``manager()`` is the controller's current Manager, or None while it is a
    follower (the pages then say which controller leads, from ``leader()``).
    Without ``ssl_context`` the address must be loopback unless ``insecure``.
    """
    try:
        host, _ = split_hostport(listen, key="dashboardListen")
    except AddressError as exc:
        raise DashboardError(str(exc)) from exc
    if ssl_context is None and not insecure and not is_loopback(host):
        raise DashboardError(f"dashboardListen: {listen} is not a loopback address; serving it needs TLS (pkiDir) "
                             "or 'insecure: true'")
    d = Dashboard(manager=manager, gate=gate, tls=ssl_context is not None, leader=leader)
    url = await d.start(listen, ssl_context)
    log.info("serving the dashboard on %s%s", url, "" if ssl_context else " (plaintext, no authentication)")
    return d
