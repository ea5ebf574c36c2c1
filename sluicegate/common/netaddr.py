"""Address helpers shared by the agent and the controller (neither imports the other)."""

from __future__ import annotations

import ipaddress


class AddressError(ValueError):
    """A setting that should be HOST:PORT is not."""


def split_hostport(value: str, *, key: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise AddressError(f"{key}: expected HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


def join_hostport(host: str, port: int) -> str:
    """HOST:PORT, with an IPv6 host in brackets (the inverse of split_hostport)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_loopback(host: str) -> bool:
    """True for a host that only this machine can reach (a name that resolves elsewhere is not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
