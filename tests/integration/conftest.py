from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluicegate.security.podsecurity import NOBODY

from .harness import Controller


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    c = Controller(tmp_path, extra=["--no-placement"]).start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def pod_dir() -> Iterator[Path]:
    """A directory the pods' default user (nobody, 65534) can write: pods never run as root.

    Under /tmp, not tmp_path: pytest's base directory is 0700, which a pod
    running as nobody cannot pass through.
    """
    d = Path(tempfile.mkdtemp(prefix="sg-pods-"))
    os.chmod(d, 0o755)
    os.chown(d, NOBODY, NOBODY)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
