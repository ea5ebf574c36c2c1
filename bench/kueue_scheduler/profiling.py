"""Top items of a controller profile: py-spy's collapsed stacks or a cProfile dump.

For py-spy (``--format raw``: one ``frame;frame;... count`` line per stack),
*self* is the share of samples whose innermost frame is the function and
*total* the share of samples with the function anywhere on the stack.  For
cProfile the same two columns come from tottime and cumtime.
"""

from __future__ import annotations

import pstats
import re
from dataclasses import dataclass
from pathlib import Path

# py-spy frame: "function (path/to/file.py:123)"; the line varies by sample, the function does not.
_FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


@dataclass(frozen=True, slots=True)
class Item:
    where: str
    self_share: float
    total_share: float


def _short(file: str) -> str:
    for marker in ("/sluicegate/", "/site-packages/", "/lib/python3"):
        i = file.find(marker)
        if i >= 0:
            return file[i + 1:]
    return file


def _frame_key(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    if m is None:
        return frame.strip()
    return f"{m['fn']} ({_short(m['file'])})"


# Frames every sample of the event loop passes through: no information in a top list.
_SCAFFOLDING = ("<frozen runpy>", "asyncio/runners.py", "BaseEventLoop.run_forever", "BaseEventLoop.run_until_complete",
                "BaseEventLoop._run_once", "<module> (sluicegate/controller/server.py)", "main (sluicegate/controller/server.py)")
_IDLE = ("EpollSelector.select (selectors.py)", "select (selectors.py)")


@dataclass(frozen=True, slots=True)
class PySpyTop:
    # Samples of the thread that runs the event loop (py-spy --threads labels it MainThread).
    samples: int
    # Of those, samples waiting in the selector: the loop had nothing to do.
    idle: int
    by_self: list[Item]
    by_total: list[Item]


def pyspy_top(path: Path, *, limit: int = 25) -> PySpyTop:
    """Top functions of the event-loop thread from a py-spy raw file (``--threads --idle``).

    Shares are of all the loop thread's samples, idle included, so they add up
    with the idle share to 100 %.
    """
    self_n: dict[str, int] = {}
    total_n: dict[str, int] = {}
    samples = idle = 0
    for line in path.read_text().splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        frames = stack.split(";")
        if frames[0].startswith("thread ") or frames[0].startswith("process "):
            if "MainThread" not in frames[0]:
                continue
            frames = frames[1:]
        if not frames:
            continue
        count = int(count_s)
        keys = [_frame_key(f) for f in frames]
        samples += count
        if keys[-1] in _IDLE:
            idle += count
            continue
        self_n[keys[-1]] = self_n.get(keys[-1], 0) + count
        for k in set(keys):
            if not any(s in k for s in _SCAFFOLDING):
                total_n[k] = total_n.get(k, 0) + count
    if samples == 0:
        return PySpyTop(0, 0, [], [])

    def top(counts: dict[str, int]) -> list[Item]:
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        return [Item(k, self_n.get(k, 0) / samples, total_n.get(k, 0) / samples) for k, _ in ranked]

    return PySpyTop(samples, idle, top(self_n), top(total_n))


def cprofile_top(path: Path, *, limit: int = 25) -> tuple[float, list[Item], list[Item]]:
    """(total seconds, top by tottime, top by cumtime) from a cProfile dump."""
    st = pstats.Stats(str(path))
    raw = st.stats  # type: ignore[attr-defined]
    total = st.total_tt  # type: ignore[attr-defined]
    rows = []
    for (file, line, fn), (_cc, _nc, tt, ct, _callers) in raw.items():
        rows.append((f"{fn} ({_short(file)}:{line})", tt, ct))
    if not total:
        return 0.0, [], []
    by_self = sorted(rows, key=lambda r: -r[1])[:limit]
    # Skip the interpreter's own entry points, which are 100 % by construction.
    by_total = [r for r in sorted(rows, key=lambda r: -r[2]) if not r[0].startswith(("<built-in method builtins.exec>", "<module>"))][:limit]
    return total, [Item(w, tt / total, ct / total) for w, tt, ct in by_self], [Item(w, tt / total, ct / total) for w, tt, ct in by_total]


def render(title: str, items: list[Item]) -> str:
    lines = [f"{title}", f"{'self %':>7} {'total %':>8}  function"]
    for it in items:
        lines.append(f"{it.self_share * 100:7.1f} {it.total_share * 100:8.1f}  {it.where}")
    return "\n".join(lines)
