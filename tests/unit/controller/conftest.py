from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from .served import Served, serve


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """The controller's gRPC API in-process (see served.py)."""
    async with serve(tmp_path) as s:
        yield s
