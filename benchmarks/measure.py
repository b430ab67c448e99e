"""Running a benchmarked command as its own process, the way a user runs it."""

import os
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def run(cmd):
    """Wall seconds, peak RSS (MiB) of the process tree (os.wait4) and stdout of a command that must succeed."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": sys.executable, "PYTHONWARNINGS": "ignore"}
    start = time.perf_counter()
    proc = subprocess.Popen([str(c) for c in cmd], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{cmd[1]} failed:\n{err[-3000:]}")
    return seconds, usage.ru_maxrss / 1024, out
