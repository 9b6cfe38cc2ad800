"""CPU of a test run with every process it starts: `python -m tests.support.cputime pytest tests/x.py -q`.

`/usr/bin/time` counts the children a process waits for; the tests' PostgreSQL is started by `pg_ctl`, which
daemonizes it, so its backends' CPU (migrations, every query of the workers and the API) is not counted there. This
runs the command as a child subreaper (Linux): orphaned descendants are re-parented to it and reaped when they exit,
so their CPU is counted too. Prints wall, user and system seconds and the 1-minute load average."""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    start = time.monotonic()
    code = subprocess.call([sys.executable, "-m", *argv] if argv[0] == "pytest" else argv)
    while True:  # the orphans (a Postgres stopped at the session's end) until none is left
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"{time.monotonic() - start:.1f} s wall, {usage.ru_utime:.1f} s user, {usage.ru_stime:.1f} s sys, "
        f"load {os.getloadavg()[0]:.1f}, exit {code}",
        file=sys.stderr,
    )
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
