"""sluicectl run in-process against a real served controller (tests/unit/controller/served.py)."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from sluicegate.cli.main import main
from tests.unit.controller.served import Served, serve


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
async def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Served]:
    # No client config or server from the environment: only what a test passes.
    monkeypatch.delenv("SLUICEGATE_SERVER", raising=False)
    monkeypatch.delenv("SLUICEGATE_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    async with serve(tmp_path) as s:
        yield s


def _run(argv: Sequence[str]) -> Result:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return Result(code, out.getvalue(), err.getvalue())


async def ctl(served: Served, *argv: str) -> Result:
    """sluicectl ARGV against ``served`` (its own event loop, in a thread: main() runs asyncio.run)."""
    return await asyncio.to_thread(_run, [*argv, "--server", served.address])


def ctl_offline(*argv: str) -> Result:
    return _run(list(argv))
