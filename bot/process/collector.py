"""Python's cyclic garbage collector held off for a command that builds much and frees little.

`gpubot diagnose` imports its libraries, loads the rules, reads a snapshot and builds facts
from it: millions of small dicts, lists and models at 5,000 nodes, alive until the command
ends and none of them in a cycle. Each collection rescanned the growing heap for nothing:
about a third of a 5,000-node diagnosis (what made it grow faster than the snapshot), and
about a twentieth of a 50-node one, where the imports and the rules are most of the work.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collection_paused() -> Iterator[None]:
    """The collector off inside; on leaving, what was built is frozen (never scanned again)
    and collection resumes."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
