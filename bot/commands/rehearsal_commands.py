"""`gpubot demo` and `gpubot drill`: rehearsals of the serving code on a simulated cluster
(or, for `demo --replay`, on the rule tests' snapshots), shown in the terminal.

They parse their options, call their composition roots (`bot.roots.demo`, `bot.roots.drill`,
`bot.roots.offline` for the replay) and print what the on-call would see. The simulator is
reached only through those roots, when the command runs: this module must never import
`gpusim`, nor at its top anything the other commands do not need (bot/commands/shared.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.commands.shared import (
    ConfigOption,
    LangOption,
    handles_bad_input,
    read_settings,
    stderr,
    terminal,
)
from bot.model import Lang

if TYPE_CHECKING:
    from rich.console import Console

    from bot.config import Settings


@handles_bad_input
def demo(
    lang: LangOption = None,
    config: ConfigOption = None,
    replay: Annotated[
        bool,
        typer.Option("--replay", help="Replay the rule-test scenarios instead of a live cluster."),
    ] = False,
    pause: Annotated[float, typer.Option("--pause", min=0.2, help="Seconds between faults.")] = 1.0,
    approve_as: Annotated[
        str | None,
        typer.Option(
            "--approve-as", help="Approve every proposal as this person, without prompting."
        ),
    ] = None,
    store_url: Annotated[
        str | None,
        typer.Option("--store-url", help="Keep the demo's incidents here (default: a temp file)."),
    ] = None,
) -> None:
    """A live simulated GPU cluster, scripted faults, and the diagnoses as they happen."""
    from rich.text import Text

    from bot.chat.console import print_diagnoses
    from bot.roots import offline

    settings = read_settings(config)
    language = lang or settings.lang
    console = terminal()
    if not replay:
        _live_demo(settings, language, console, pause, approve_as, store_url)
        return
    for scenario in offline.demo_scenarios(settings):
        console.rule(Text(scenario.name, style="bold"))
        outcome = offline.run_rule_test(
            scenario.test.model_copy(update={"lang": language}),
            scenario.where,
            scenario.base_dir,
            scenario.rules,
            settings,
        )
        print_diagnoses(outcome.diagnoses, console, language)


def _live_demo(
    settings: Settings,
    language: Lang,
    console: Console,
    pause: float,
    approve_as: str | None,
    store_url: str | None,
) -> None:
    from bot.chat.console import ConsoleApprover
    from bot.roots import demo as live
    from bot.roots import offline

    interactive = approve_as is not None or sys.stdin.isatty()
    approver = ConsoleApprover(console, approve_as, language)
    live.run(
        offline.load_ruleset(settings),
        settings,
        language,
        live.console_output(console, language),
        pause,
        approve=approver.ask if interactive else None,
        approver_name=approve_as or "you",
        store_url=store_url,
    )


@handles_bad_input
def drill_command(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Drill files or folders (default: the drills gpubot ships)."),
    ] = None,
    config: ConfigOption = None,
    rules: Annotated[
        Path | None, typer.Option("--rules", help="Rules folder to rehearse with.")
    ] = None,
    real_time: Annotated[
        bool,
        typer.Option("--real-time", help="Keep your settle, resolve and schedule windows (slow)."),
    ] = False,
    show_chat: Annotated[
        bool, typer.Option("--show-chat", help="Print what the chat is shown as it happens.")
    ] = False,
    prometheus: Annotated[
        str,
        typer.Option(
            "--prometheus",
            help="auto: the prometheus on PATH scrapes the simulated dcgm-exporters for the "
            "evidence the health gate reads; off: none (the gate cannot pass); or its path.",
        ),
    ] = "auto",
) -> None:
    """Rehearse scenarios on a simulated cluster through the real serving code; a table of
    what the on-call saw; exit 1 when a check fails."""
    from rich.text import Text

    from bot.config import bundled_dir
    from bot.roots import drill as drills

    settings = read_settings(config)
    if rules is not None:
        settings = settings.model_copy(update={"rules_dir": rules})
    chosen = drills.load_drills(paths or [bundled_dir("drills")])
    prometheus_bin = drills.find_prometheus(prometheus)
    console = terminal()
    if prometheus_bin is None:
        stderr().print(
            "note: no Prometheus (apt install prometheus, or --prometheus PATH): the health "
            "gate has no GPU evidence and cannot pass",
            markup=False,
        )
    verdicts = []
    for each in chosen:
        console.print(Text(f"drill {each.drill}: {each.about}", style="bold"))
        verdict = drills.run_drill(
            each,
            settings,
            real_time=real_time,
            prometheus_bin=prometheus_bin,
            show=console if show_chat else None,
        )
        for check in verdict.checks:
            mark = "✓" if check.passed else "✗"
            style = "" if check.passed else "bold red"
            detail = f" ({check.detail})" if check.detail else ""
            console.print(Text(f"  {mark} {check.name}{detail}", style=style))
        verdicts.append(verdict)
    console.print(drills.table(verdicts))
    if not all(v.passed for v in verdicts):
        raise typer.Exit(1)
