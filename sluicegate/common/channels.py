"""gRPC client channels: plaintext, TLS, mutual TLS, or TLS with a bearer token."""

from __future__ import annotations

from collections.abc import Sequence

import grpc


def open_channel(
    address: str,
    *,
    ca: bytes | None = None,
    cert: bytes | None = None,
    key: bytes | None = None,
    token: str | None = None,
    options: Sequence[tuple[str, object]] = (),
) -> grpc.aio.Channel:
    """A channel to ``address``: TLS verified against ``ca`` when given, else plaintext.

    ``cert``/``key`` present a client certificate; ``token`` is sent as
    ``authorization: Bearer`` on every call (gRPC sends call credentials
    only over TLS, so a token never travels in the clear).
    """
    if ca is None:
        if cert is not None or token:
            raise ValueError("credentials need TLS: no CA certificate to verify the controller with")
        return grpc.aio.insecure_channel(address, options=list(options))
    creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
    if token:
        creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(token))
    return grpc.aio.secure_channel(address, creds, options=list(options))
