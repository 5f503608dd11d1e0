"""Optional per-thread cProfile for bench/kuberay_bench.py: with
GANGSCHED_KUBERAY_PROFILE=PATH, every thread the shim starts profiles
itself (cProfile sees only the thread that enables it), and the merged
pstats are written to PATH when the process stops."""

from __future__ import annotations

import cProfile
import os
import pstats
import threading
import time

_PATH = os.environ.get("GANGSCHED_KUBERAY_PROFILE", "")
_profiles: list[cProfile.Profile] = []
_lock = threading.Lock()


def thread_start() -> None:
    """Called first thing in each of the shim's threads."""
    if not _PATH:
        return
    # CPU time of the thread, not wall time: waits do not count.
    p = cProfile.Profile(time.thread_time)
    with _lock:
        _profiles.append(p)
    p.enable()


def dump() -> None:
    if not _PATH:
        return
    with _lock:
        profiles = list(_profiles)
    if not profiles:
        return
    stats = pstats.Stats(profiles[0])
    for p in profiles[1:]:
        stats.add(p)
    stats.dump_stats(_PATH)
