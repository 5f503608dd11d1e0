"""Shared fixtures: the real gangsched binary (GANGSCHED_SERVER, set by
ctest) on free loopback ports, through tests/server_process.py."""

from __future__ import annotations

import os
import sys
from typing import Iterator

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from server_process import PersistentServer  # noqa: E402



def server_binary() -> str:
    binary = os.environ.get("GANGSCHED_SERVER", "")
    if not binary:
        pytest.fail("GANGSCHED_SERVER must name the gangsched binary")
    return binary


@pytest.fixture
def server() -> Iterator[PersistentServer]:
    s = PersistentServer(server_binary(),
                         extra_args=["--watch-heartbeat-seconds", "1"])
    s.start()
    try:
        yield s
    finally:
        s.stop()
        s.cleanup()
