"""A file someone handed to a command, read only when it is within the size limit of its kind.

Why it exists: people diagnose files other people send them (a snapshot, an alert dump, a
must-gather), and what reads them holds many times their size in memory (PyYAML some 42
bytes per byte of YAML). A file too big for the machine is refused before a byte of it is
parsed, in one line that names the limit and the setting that raises it; the limits by kind,
and why they are what they are, are `bot.config.InputLimits`.

What it must never do: read past a limit, or cut a file at its limit and hand on the rest as
if it were whole (a snapshot without its last nodes is another cluster, a kernel log without
its end misses the newest Xid).
"""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from bot.errors import InputError
from bot.model import Lang
from bot.texts import say

MIB = 1 << 20


@dataclass(frozen=True)
class Limit:
    """How many MiB one kind of input may hold, and what raises it."""

    kind: str
    """The input's kind, as the catalogue names it: `input.kind.<kind>`."""
    mib: int
    setting: str | None = None
    """The dotted setting that raises it (`limits.yaml_snapshot_mib`); None: fixed."""
    hint: str | None = None
    """A catalogue key said after the limit: what else the person can do."""

    @property
    def max_bytes(self) -> int:
        return self.mib * MIB

    def refusal(self, where: str, size: int | None) -> InputError:
        """The one line for an input of `size` bytes over this limit (None: a stream, of
        which only the first bytes past the limit were read)."""
        kind = say(Lang.EN, f"input.kind.{self.kind}")
        if size is None:
            text = say(Lang.EN, "input.too_big.stream", limit=self.mib, kind=kind)
            needed = self.mib * 2
        else:
            mib = f"{size / MIB:.1f}"
            text = say(Lang.EN, "input.too_big", mib=mib, limit=self.mib, kind=kind)
            needed = max(math.ceil(size / MIB), self.mib + 1)
        if self.setting is not None:
            env = "GPUBOT_" + self.setting.upper().replace(".", "__")
            text += say(Lang.EN, "input.raise", setting=self.setting, env=env, needed=needed)
        if self.hint is not None:
            text += say(Lang.EN, self.hint)
        return InputError(where, text)


HAND_WRITTEN = Limit("hand_written", 4)
"""Rules, rule tests, drills, settings and the alert mapping: written by people, read before
the settings are (the settings file is one of them), so no setting raises it. The largest
shipped rule file is 45 KB."""


def check_size(path: Path, limit: Limit, where: str | None = None) -> None:
    """Refuse a regular file over `limit` by its size alone, before it is opened or mapped.
    Anything else (a pipe, a device) is left to the reader, which counts what it reads."""
    try:
        status = path.stat()
    except OSError:
        return  # the reader says why it cannot open it
    if stat.S_ISREG(status.st_mode) and status.st_size > limit.max_bytes:
        raise limit.refusal(where or str(path), status.st_size)


def read_within(path: Path, limit: Limit, where: str | None = None) -> bytes:
    """The bytes of the file at `path`, or InputError when there are more than `limit`
    holds (told by its size before reading when it is a regular file) or it cannot be read."""
    shown = where or str(path)
    check_size(path, limit, shown)
    try:
        with path.open("rb") as file:
            return read_stream_within(file, limit, shown, os.fstat(file.fileno()).st_size)
    except OSError as exc:
        raise InputError(shown, exc.strerror or str(exc)) from exc


def read_stream_within(
    stream: BinaryIO, limit: Limit, where: str, size: int | None = None
) -> bytes:
    """At most `limit` bytes of `stream` (standard input, a pipe, a file), or InputError:
    one byte past the limit is read, to know there is more, and nothing after it."""
    data = stream.read(limit.max_bytes + 1)
    if len(data) > limit.max_bytes:
        raise limit.refusal(where, size if size and size > limit.max_bytes else None)
    return data
