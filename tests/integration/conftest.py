from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import Controller


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    c = Controller(tmp_path, extra=["--no-placement"]).start()
    try:
        yield c
    finally:
        c.stop()
