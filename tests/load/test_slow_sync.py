"""bench/load/slow_sync.cc, preloaded, delays fsync and fdatasync by
SLOW_SYNC_MS and then makes the call: both succeed (Python raises, and the
probe exits non-zero, on a failed call or a crash in the shim).

Usage: test_slow_sync.py PATH_TO_libslow_sync.so
"""

import os
import subprocess
import sys
import tempfile
import unittest

LIB = None

# Times each sync call in a fresh interpreter with the library preloaded.
PROBE = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)
os.write(fd, b"x" * 4096)
for call in (os.fdatasync, os.fsync):
    start = time.monotonic()
    call(fd)
    print("%.4f" % (time.monotonic() - start))
os.close(fd)
"""


class SlowSyncTest(unittest.TestCase):

    def probe(self, ms):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "f")
            env = dict(os.environ, LD_PRELOAD=LIB, SLOW_SYNC_MS=str(ms))
            out = subprocess.run([sys.executable, "-c", PROBE, path], env=env,
                                 capture_output=True, text=True, timeout=30)
            self.assertEqual(out.returncode, 0, out.stderr)
            return [float(t) for t in out.stdout.split()]

    def test_both_syncs_are_delayed(self):
        fdatasync_s, fsync_s = self.probe(300)
        self.assertGreaterEqual(fdatasync_s, 0.3)
        self.assertGreaterEqual(fsync_s, 0.3)

    def test_zero_turns_the_delay_off(self):
        # A real sync of 4 KiB takes well under 300 ms; the bound is loose on
        # purpose, so a slow CI disk does not fail it.
        for seconds in self.probe(0):
            self.assertLess(seconds, 0.3)


if __name__ == "__main__":
    LIB = os.path.abspath(sys.argv.pop(1))
    unittest.main()
