"""Coalescing the messages of one long-lived gRPC stream into batches.

A gRPC aio stream moves about one message per turn of the event loop at each
end: every write and every read waits for a completion that the loop only
notices between callbacks.  While the controller runs a 50 ms scheduling
cycle, an agent's stream therefore carries roughly twenty messages a second
whatever the bandwidth, and a burst of RunPods or pod reports queues for
seconds.  The sender drains everything already queued into one batch message
instead, so a turn of the loop carries a whole burst.

Order is kept: a batch holds consecutive messages, and the receiver handles
them in order.  Some messages must travel alone (an agent's Register is read
as the stream's first message by itself), and a batch is capped in count and
bytes so it stays well under gRPC's 4 MiB message limit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Protocol, TypeVar

log = logging.getLogger(__name__)

MAX_BATCH_MESSAGES = 512
MAX_BATCH_BYTES = 1 << 20

# gRPC options for a small HTTP/2 receive window, used by both ends of an
# agent's stream.  The receiver's loop reads one message per stream per turn;
# with the default window (grown further by BDP probing) a sender's writes
# complete at once and seconds of small batches pile up in the pipe, each
# report arriving late while its pod's quota sits held.  With a few KiB in
# flight the sender's write waits instead, so what queues meanwhile goes out
# as one batch.  A message larger than the window still goes through: the
# transport opens the window for a message in progress.
STREAM_WINDOW_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.http2.lookahead_bytes", 4096),
    ("grpc.http2.bdp_probe", 0),
)


class _Message(Protocol):
    def ByteSize(self) -> int: ...

    def WhichOneof(self, oneof_group: str) -> str | None: ...


M = TypeVar("M", bound=_Message)


async def coalesced(
    queue: asyncio.Queue[M | None],
    *,
    batch: Callable[[list[M]], M],
    alone: Callable[[M], bool] = lambda _: False,
    max_messages: int = MAX_BATCH_MESSAGES,
    max_bytes: int = MAX_BATCH_BYTES,
) -> AsyncIterator[M]:
    """Yield the queue's messages until it yields None, batching what has piled up.

    A single waiting message goes out as it is; two or more consecutive ones
    go out as ``batch(messages)``.  A message for which ``alone`` is true is
    never put in a batch.
    """
    carried: M | None = None
    while True:
        first = carried if carried is not None else await queue.get()
        carried = None
        if first is None:
            return
        if alone(first):
            yield first
            continue
        group = [first]
        size = first.ByteSize()
        closing = False
        while len(group) < max_messages:
            try:
                nxt = queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            if nxt is None:
                closing = True
                break
            nxt_size = nxt.ByteSize()
            if alone(nxt) or size + nxt_size > max_bytes:
                carried = nxt
                break
            group.append(nxt)
            size += nxt_size
        yield group[0] if len(group) == 1 else batch(group)
        if closing:
            return


def unbatched(msg: M, messages_of: Callable[[M], Sequence[M]]) -> Sequence[M]:
    """The messages a received message stands for, in order: a batch's contents, or itself.

    ``messages_of`` reads a batch's messages.  A batch inside a batch is not
    something any sluicegate sender produces; it is dropped with a warning
    rather than trusted.
    """
    if msg.WhichOneof("kind") != "batch":
        return (msg,)
    inner = messages_of(msg)
    if any(m.WhichOneof("kind") == "batch" for m in inner):
        log.warning("dropping nested batch messages from a peer; a batch must not contain a batch")
        return [m for m in inner if m.WhichOneof("kind") != "batch"]
    return inner


def varint(n: int) -> bytes:
    """Protobuf's varint of a non-negative int."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# A repeated message field number 1 (a batch's ``messages``): its tag and length
# prefix for each length under 16 KiB, looked up instead of encoded per message.
_ELEMENT_HEADS = [b"\x0a" + varint(n) for n in range(0x4000)]


def length_delimited(tag: bytes, payload: bytes) -> bytes:
    """``payload`` as the length-delimited field whose (already encoded) key is ``tag``."""
    return b"".join((tag, varint(len(payload)), payload))


def drain_encoded(
    first: bytes,
    queue: asyncio.Queue[bytes | None],
    *,
    batch_tag: bytes,
    max_messages: int = MAX_BATCH_MESSAGES,
    max_bytes: int = MAX_BATCH_BYTES,
) -> tuple[bytes, bytes | None, bool]:
    """What :func:`coalesced` does, for a queue of encoded messages, in one synchronous step.

    ``first`` was taken off the queue; what else is waiting joins it, up to
    the caps (counted as coalesced counts them: the messages' own sizes).
    Returns (the encoded message to send: ``first`` itself when nothing
    joined it, else a batch, field ``batch_tag`` holding the messages as its
    field 1; the message taken but left for the next batch, or None; whether
    the queue ended).  The bytes are those the generated serializer writes
    for the message coalesced would build: a message's fields are written in
    field-number order, and its one field here is the batch, so no
    serialization or ``ByteSize`` is needed per message.
    """
    size = len(first)
    parts: list[bytes] | None = None
    count = 1
    carried: bytes | None = None
    closing = False
    heads = _ELEMENT_HEADS
    while count < max_messages:
        try:
            nxt = queue.get_nowait()
        except asyncio.QueueEmpty:
            break
        if nxt is None:
            closing = True
            break
        n = len(nxt)
        if size + n > max_bytes:
            carried = nxt
            break
        if parts is None:
            m = len(first)
            parts = [heads[m] if m < 0x4000 else b"\x0a" + varint(m), first]
        parts.append(heads[n] if n < 0x4000 else b"\x0a" + varint(n))
        parts.append(nxt)
        size += n
        count += 1
    if parts is None:
        return first, carried, closing
    return length_delimited(batch_tag, b"".join(parts)), carried, closing
