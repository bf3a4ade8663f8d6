"""Ending a one-shot command's process without freeing its heap object by object.

A 5,000-node snapshot and its facts are millions of dicts, lists and strings. Freed one at a
time (as the functions holding them return, or by the interpreter's teardown) they cost about
0.3-0.5 s of CPU for memory the kernel takes back at once when the process ends. So
`gpubot diagnose` hands them to `held` and, once its answer is written, ends with
`os._exit`, as mypy does (`mypy.util.hard_exit`): flush, then `os._exit`.

A command opts in (`end_when_done`) only if it owes nothing after its return but its output
and what `atexit` runs (logging's flush, weakref finalizers removing temporary files), both
done here before the process ends. Never for `serve` or anything that leaves threads or
children to wait for.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

_when_done = False
held: list[object] = []
"""What the command built and no longer needs, kept from being freed piece by piece when its
function returns: the process ends with it (the snapshot, the facts)."""


def end_when_done() -> None:
    """The running command's process ends as soon as it returns (`end_now`)."""
    global _when_done  # one flag for the one command this process runs
    _when_done = True
    # A command run in a process that stays (typer's test runner) holds at most its own.
    held.clear()


def end_now(code: object) -> None:
    """If the command asked for it, end the process with `code` (a `SystemExit`'s), skipping
    the interpreter's teardown; otherwise return and let the exit go its usual way."""
    if not _when_done or not (code is None or isinstance(code, int)):
        return  # a message as the code is printed by the usual exit
    if threading.active_count() > 1:
        return  # the usual exit waits for them
    # What the usual exit would run: logging's handlers flushed, finalizers (temporary
    # files and directories) called.
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return  # a closed pipe: the usual exit says so and sets its own code
    os._exit(code or 0)
