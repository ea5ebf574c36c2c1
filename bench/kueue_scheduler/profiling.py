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


def pyspy_top(path: Path, *, limit: int = 25) -> tuple[int, list[Item], list[Item]]:
    """(samples, top by self, top by total) from a py-spy raw file."""
    self_n: dict[str, int] = {}
    total_n: dict[str, int] = {}
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        count = int(count_s)
        frames = [_frame_key(f) for f in stack.split(";")]
        # The first frame is the thread/process label py-spy adds.
        frames = [f for f in frames if not f.startswith(("process ", "thread "))] or frames
        samples += count
        self_n[frames[-1]] = self_n.get(frames[-1], 0) + count
        for f in set(frames):
            total_n[f] = total_n.get(f, 0) + count
    if samples == 0:
        return 0, [], []

    def top(counts: dict[str, int], other: dict[str, int], by_self: bool) -> list[Item]:
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        return [Item(k, (v if by_self else other.get(k, 0)) / samples, (other.get(k, 0) if by_self else v) / samples)
                for k, v in ranked]

    return samples, top(self_n, total_n, True), top(total_n, self_n, False)


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
