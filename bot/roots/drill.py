"""`gpubot drill`: rehearse a scenario on a simulated cluster through the real serving code,
and say whether the on-call would have seen what the drill says they must.

Each drill gets its own world (`drill_world`: a simulated cluster, a fresh SQLite store, and
one replica composed exactly as `gpubot serve` composes it, with a chat that records what it
shows); the script then plays in it (`drill_script`: faults and repairs, their alerts POSTed
to the webhook as Alertmanager sends them, approvals and denials by named people, `kubectl
cordon` by hand, waits); the judge reads the record; this module runs them and lays the
verdicts side by side.

Time: a drill is minutes, not hours. Unless `real_time` is asked for, the windows that only
make the bot wait (settle, resolve-after, the schedule's periods) are shortened to the
drill's scale; every other setting (approval policies, blast radius, rules, labels) is the
operator's own, which is the point of running drills before deploying them.

What it must never do: reach anything but 127.0.0.1, or judge what it did not see (the
verdict is `bot.drills.judging`'s, on the recorded chat and the stored timelines).

Only `drill_world` and `drill_script` import the simulator, beside `demo` (an import-linter
contract); the drill files' schema, the recording chat and the judge, which need no
simulator, are in `bot.drills`.
"""

from __future__ import annotations

import dataclasses
import io
import shutil
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bot.config import Settings
from bot.drills.judging import Record, Verdict, judge
from bot.drills.spec import Drill, drill_files, load_drill
from bot.errors import GpubotError
from bot.roots.drill_script import Script
from bot.roots.drill_world import start_world


def find_prometheus(choice: str) -> str | None:
    """`auto`: the `prometheus` on PATH, if any; `off`: none; otherwise a path to it."""
    if choice == "off":
        return None
    if choice == "auto":
        return shutil.which("prometheus")
    if shutil.which(choice) is None:
        raise GpubotError(f"--prometheus {choice}: no such program")
    return choice


def play_drill(
    drill: Drill,
    base: Settings,
    *,
    real_time: bool = False,
    prometheus_bin: str | None = None,
    show: Console | None = None,
) -> Record:
    """Plays one drill in a world of its own: everything the judge (or a soak's figures)
    reads."""
    quiet = Console(file=io.StringIO(), width=120)
    with tempfile.TemporaryDirectory(prefix=f"gpubot-drill-{drill.drill}-") as workdir:
        world = start_world(
            drill,
            base,
            Path(workdir),
            show or quiet,
            real_time=real_time,
            prometheus_bin=prometheus_bin,
        )
        script = Script(drill, world)
        try:
            script.play()
            for thread in script.deciding:
                thread.join(timeout=world.replica.settings.remediation.drain_timeout_s)
            digest = world.replica.service.post_digest() if drill.expect.digest else []
            return dataclasses.replace(script.record(), digest=digest)
        finally:
            script.alerts.stop()
            world.stop()


def run_drill(
    drill: Drill,
    base: Settings,
    *,
    real_time: bool = False,
    prometheus_bin: str | None = None,
    show: Console | None = None,
) -> Verdict:
    """Plays one drill and judges it."""
    record = play_drill(drill, base, real_time=real_time, prometheus_bin=prometheus_bin, show=show)
    return judge(drill, record)


def load_drills(paths: list[Path]) -> list[Drill]:
    """Every drill named, each file checked whole before any runs."""
    return [load_drill(f) for p in paths for f in drill_files(p)]


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} s"


def table(verdicts: list[Verdict]) -> Table:
    """The drills side by side: what an operator reads before deploying their settings."""
    shown = Table(title="gpubot drill")
    for column in (
        "drill",
        "checks",
        "to the right diagnosis",
        "messages",
        "wrong-proposal window",
        "reopens",
        "",
    ):
        shown.add_column(column, justify="left" if column == "drill" else "right")
    for v in verdicts:
        passed = sum(1 for c in v.checks if c.passed)
        shown.add_row(
            v.drill,
            f"{passed}/{len(v.checks)}",
            _seconds(v.time_to_right_s),
            str(v.messages),
            _seconds(v.wrong_window_s),
            str(v.reopened),
            "pass" if v.passed else "FAIL",
        )
    return shown
