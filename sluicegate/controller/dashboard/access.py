"""Who is asking the dashboard, and TLS for it: the API's authentication over HTTPS.

A request proves who it is the way an API call does, and the gate's
authenticator decides (revocation, the token file):

* a client certificate signed by the cluster CA (the TLS handshake asks for
  one but does not require it, so a browser without one can still log in);
* a bearer token in ``Authorization: Bearer ...``;
* a bearer token from the login form, kept in an HttpOnly, Secure,
  SameSite=Strict cookie.

Without TLS the gate's authenticator is the open one (the anonymous cluster
admin of a loopback-only controller), and the Host header must name a
loopback address, so a web page elsewhere cannot read the dashboard through
DNS rebinding.
"""

from __future__ import annotations

import logging
import ssl
from pathlib import Path
from typing import cast

from aiohttp import web

from sluicegate.common.netaddr import AddressError, is_loopback, split_hostport
from sluicegate.controller.service.errors import Context
from sluicegate.controller.service.gate import Gate
from sluicegate.security.authority import paths as pki_paths
from sluicegate.security.identity import Principal

log = logging.getLogger(__name__)

# The login cookie's name; its value is the bearer token itself (checked against the token file on every request).
TOKEN_COOKIE = "sluicegate_token"


class RequestContext:
    """What the gate reads from a gRPC context, taken from an HTTP request."""

    __slots__ = ("_cert", "_token", "_peer")

    def __init__(self, request: web.Request, *, token: str | None = None, use_cert: bool = True) -> None:
        self._cert = peer_certificate(request) if use_cert else None
        self._token = token if token is not None else request_token(request)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self._peer = f"http:{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else ""

    def auth_context(self) -> dict[str, list[bytes]]:
        return {"x509_pem_cert": [self._cert]} if self._cert is not None else {}

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self._token}"),) if self._token else ()

    def peer(self) -> str:
        return self._peer


def peer_certificate(request: web.Request) -> bytes | None:
    """The client certificate (PEM) the TLS handshake verified, if one was presented."""
    ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    return ssl.DER_cert_to_PEM_cert(der).encode() if der else None


def request_token(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.cookies.get(TOKEN_COOKIE) or None


def authenticate(gate: Gate, request: web.Request, *, token: str | None = None) -> Principal:
    """The caller, or Unauthenticated (audited by the gate).  ``token``: check this token alone (the login form)."""
    ctx = RequestContext(request, token=token, use_cert=token is None)
    # The gate reads a context's auth_context(), invocation_metadata() and peer(), which RequestContext provides.
    return gate.authenticate(cast(Context, ctx))


def host_is_loopback(request: web.Request) -> bool:
    """Whether the Host header names this machine (what a plaintext, loopback-only dashboard accepts)."""
    host = request.headers.get("Host", "")
    try:
        name = split_hostport(host, key="Host")[0] if host.rsplit(":", 1)[-1].isdigit() else host.strip("[]")
    except AddressError:
        return False
    return is_loopback(name)


def serving_context(pki_dir: str) -> ssl.SSLContext:
    """HTTPS with the controller's serving certificate; client certificates of the cluster CA asked for, optional.

    A renewed serving certificate is picked up by the next handshake (its
    files' modification times are checked at each one, as the gRPC ports do).
    """
    p = pki_paths(Path(pki_dir))

    def stamp() -> tuple[float, float]:
        return p["server.crt"].stat().st_mtime, p["server.key"].stat().st_mtime

    def build() -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(p["server.crt"], p["server.key"])
        ctx.load_verify_locations(cafile=p["ca.crt"])
        ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx

    current = [build(), stamp()]
    outer = current[0]
    assert isinstance(outer, ssl.SSLContext)

    def on_hello(sock: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: ssl.SSLContext) -> None:
        try:
            now = stamp()
            if now != current[1]:
                current[0], current[1] = build(), now
                log.info("dashboard: serving certificate in %s changed; using it for new connections", pki_dir)
        except (OSError, ssl.SSLError) as exc:
            log.error("dashboard: cannot reload the serving certificate (%s); keeping the one in use", exc)
        ctx = current[0]
        assert isinstance(ctx, ssl.SSLContext)
        if ctx is not outer:
            sock.context = ctx

    outer.sni_callback = on_hello
    return outer
