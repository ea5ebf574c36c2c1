"""Finding the leading controller among several: addresses, redirects, rotation.

A controller that does not lead answers every call with UNAVAILABLE and,
when it knows the leader, trailing metadata naming where the leader serves
(``sluicegate-leader`` for the mutual-TLS port, ``sluicegate-leader-token``
for the token port).  Clients and agents hold an :class:`Endpoints` list:
they follow a redirect at once and otherwise try the next address.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import grpc

LEADER_KEY = "sluicegate-leader"
LEADER_TOKEN_KEY = "sluicegate-leader-token"


def split_addresses(value: str | Sequence[str]) -> list[str]:
    """'a:1, b:2' or ['a:1', 'b:2'] -> ['a:1', 'b:2'] (empty entries dropped, order and duplicates kept once)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        item = item.strip()
        if item and item not in out:
            out.append(item)
    return out


def leader_hint(exc: BaseException, *, token: bool = False) -> str | None:
    """The leader's address a follower named in its refusal, if any."""
    if not isinstance(exc, grpc.aio.AioRpcError) or exc.code() != grpc.StatusCode.UNAVAILABLE:
        return None
    want = LEADER_TOKEN_KEY if token else LEADER_KEY
    return metadata_value(exc.trailing_metadata(), want)


def metadata_value(metadata: Iterable[Any] | None, key: str) -> str | None:
    for item in metadata or ():
        k, v = (item.key, item.value) if hasattr(item, "key") else item
        if k == key and v:
            return v if isinstance(v, str) else bytes(v).decode()
    return None


class Endpoints:
    """The controllers one may talk to, which one is in use, and where a redirect points."""

    def __init__(self, addresses: str | Sequence[str]) -> None:
        self.addresses = split_addresses(addresses)
        if not self.addresses:
            raise ValueError("no controller address")
        self._index = 0
        self._redirect: str | None = None
        # Failures since a call last succeeded: a whole round of them means "back off".
        self.failures = 0

    @property
    def current(self) -> str:
        return self._redirect or self.addresses[self._index]

    @property
    def several(self) -> bool:
        return len(self.addresses) > 1

    def redirect(self, address: str) -> None:
        """A follower named the leader: use it next (it need not be in the list)."""
        self._redirect = address
        if address in self.addresses:
            self._index = self.addresses.index(address)
            self._redirect = None

    def failed(self) -> bool:
        """The current address did not answer: move on; True when a whole round failed (time to back off)."""
        self.failures += 1
        if self._redirect is not None:
            self._redirect = None
        else:
            self._index = (self._index + 1) % len(self.addresses)
        return self.failures % len(self.addresses) == 0

    def succeeded(self) -> None:
        self.failures = 0
