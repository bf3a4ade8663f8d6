"""How a drain's progress is told: each new blocker once, pods folded by what holds them, and
every quarter of the way with what still blocks and for how long. A thread, not a firehose.

Why it exists: a drain reports every refusal of every pod (a budget's 429 comes back every
second or two for each pod it holds); told as it comes, a drain blocked 40 s wrote 56
timeline entries and 51 thread posts, one per pod per distinct error (issue 31, finding 3).
What the on-call needs is what is in the way, once, and whether the drain moves.

What it must never do: tell a count lower than one already told (evictions finish on several
threads at once), stay silent about a blocker the drain has not told before, or tell the same
blocker twice in a row.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Protocol

from bot.model import Lang
from bot.texts import say

_BUDGET = re.compile(r"disruption budget (\S+)")
_PREFIX = re.compile(r"^(?:eviction of|delete) pod \S+: ")


class Progress(Protocol):
    """How far a drain is (`bot.acting.draining.DrainProgress`)."""

    @property
    def done(self) -> int: ...
    @property
    def total(self) -> int: ...
    @property
    def pod(self) -> str: ...
    @property
    def event(self) -> str: ...
    @property
    def detail(self) -> str: ...


Tell = Callable[[str, dict[str, object]], None]
"""A line to tell, with the data its timeline entry keeps."""


def cause_of(pod: str, detail: str) -> str:
    """What holds a pod, the same words for every pod it holds: a budget by its name (its
    healthy counts move from one refusal to the next), else the refusal without the pod."""
    found = _BUDGET.search(detail)
    if found is not None:
        namespace = pod.split("/", 1)[0]
        return f"PDB {namespace}/{found.group(1)}"
    return _PREFIX.sub("", detail)


class ProgressReport:
    """Owns what one drain has told: the blockers already named and which pods each still
    holds (with when it was first seen), and the quarters already reached. Never: tells a
    blocker twice, or a quarter before the one told."""

    def __init__(self, tell: Tell, lang: Callable[[], Lang]) -> None:
        self._tell = tell
        self._lang = lang
        self._lock = threading.Lock()
        self._holding: dict[str, set[str]] = {}
        self._since: dict[str, float] = {}
        self._quarter = 0

    def __call__(self, progress: Progress) -> None:
        with self._lock:
            if progress.event == "blocked":
                self._blocked(progress)
            elif progress.event == "gone":
                self._gone(progress)
            # "evicted" is on the way to "gone"; "stalled" is the drain's end, which its
            # result tells whole.

    def _blocked(self, progress: Progress) -> None:
        cause = cause_of(progress.pod, progress.detail)
        for pods in self._holding.values():
            pods.discard(progress.pod)
        first = cause not in self._holding
        self._holding.setdefault(cause, set()).add(progress.pod)
        if first:
            self._since[cause] = time.monotonic()
            text = say(self._lang(), "exec.blocked", pod=progress.pod, detail=progress.detail)
            self._tell(text, {"done": progress.done, "total": progress.total, "cause": cause})

    def _gone(self, progress: Progress) -> None:
        for pods in self._holding.values():
            pods.discard(progress.pod)
        quarter = (4 * progress.done) // max(progress.total, 1)
        if quarter <= self._quarter:
            return
        self._quarter = quarter
        lang = self._lang()
        text = say(lang, "exec.evicted", done=progress.done, total=progress.total)
        still = [
            say(
                lang,
                "exec.still_blocked",
                n=len(pods),
                cause=cause,
                seconds=f"{time.monotonic() - self._since[cause]:.0f}",
            )
            for cause, pods in sorted(self._holding.items())
            if pods
        ]
        if still:
            text += say(lang, "gate.separator") + say(lang, "gate.separator").join(still)
        self._tell(text, {"done": progress.done, "total": progress.total})
