"""`gpubot diagnose` and `gpubot rules lint|test`: the commands that need no cluster, store or
socket, only rule files, snapshots and alerts read from disk.

They parse their options, call the offline composition root (`bot.roots.offline`), print
and pick the exit code: 2 for bad input or a rule error, 1 for a failing rule test. At its top
this module must import no more than `shared` does: `gpubot diagnose --format json` is the
command whose start-up is measured (benchmarks/startup.py), so everything else it uses is
imported inside the function that needs it."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bot.clock import utcnow
from bot.commands.shared import (
    ConfigOption,
    Format,
    LangOption,
    handles_bad_input,
    read_settings,
    report_errors,
    stderr,
    terminal,
)
from bot.errors import GpubotError
from bot.model import Lang

if TYPE_CHECKING:
    from bot.diagnose import DiagnoseResult
    from bot.model import Diagnosis
    from bot.rules.loading import RuleSet


def diagnosis_json(d: Diagnosis) -> dict[str, Any]:
    """The shape `--format json` promises scripts, spelled out field by field so that a field
    renamed in the model does not rename it here."""
    return {
        "rule": d.rule,
        "node": d.node,
        "pool": d.pool,
        "stage": d.stage.value,
        "severity": d.severity.value,
        "title": d.title,
        "summary": d.summary,
        "expected": d.expected,
        "questions": d.questions.model_dump(),
        "evidence": d.evidence,
        "blockers": [b.model_dump() for b in d.blockers],
        "causes": d.causes,
        "check_first": d.check_first,
        "runbook": [s.model_dump() for s in d.runbook],
        "rollback": d.rollback,
        "proposals": [
            {"action": p.action.value, "requires_approval": p.requires_approval, "force": p.force}
            for p in d.proposals
        ],
    }


def _print(diagnoses: list[Diagnosis], fmt: Format, lang: Lang) -> None:
    if fmt is Format.JSON:
        sys.stdout.write(
            json.dumps(
                {"diagnoses": [diagnosis_json(d) for d in diagnoses]}, ensure_ascii=False, indent=2
            )
            + "\n"
        )
    elif fmt is Format.MARKDOWN:
        from bot.chat.console import render_markdown

        sys.stdout.write(render_markdown(diagnoses, lang))
    else:
        from bot.chat.console import print_diagnoses

        print_diagnoses(diagnoses, terminal(), lang)


@handles_bad_input
def diagnose_command(
    snapshot: Annotated[
        list[Path],
        typer.Option(
            "--snapshot",
            help="kubectl get nodes,pods,events,pdb,ds -A -o json (or -o yaml; - for stdin), "
            "or a GPU Operator must-gather folder. Repeat to combine several.",
        ),
    ],
    kernel_log: Annotated[
        list[Path] | None,
        typer.Option(
            "--kernel-log",
            help="journalctl -k, dmesg or nvidia-bug-report output of --node: its NVRM Xid lines.",
        ),
    ] = None,
    node: Annotated[
        str | None, typer.Option("--node", help="The node the --kernel-log files are from.")
    ] = None,
    alerts: Annotated[
        list[Path] | None,
        typer.Option("--alerts", help="Alertmanager webhook payload (JSON/YAML)."),
    ] = None,
    lang: LangOption = None,
    fmt: Annotated[Format, typer.Option("--format")] = Format.TEXT,
    now: Annotated[
        datetime | None, typer.Option("--now", help="Judge ages as of this time (default: now).")
    ] = None,
    rules: Annotated[Path | None, typer.Option("--rules", help="Rules file or directory.")] = None,
    config: ConfigOption = None,
) -> None:
    """Diagnose a cluster snapshot (and alerts) offline."""
    from bot.process.collector import collection_paused
    from bot.process.ending import end_when_done

    # It reads and writes nothing but its output: its heap is not freed object by object
    # when it ends (bot/process/ending.py).
    end_when_done()
    # gpubot uses no pydantic plugin, and pydantic looks for them among every installed
    # package's entry points when it builds its first validator. A one-shot command that
    # starts no other process says so for itself; a user's own setting stands.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    # From the first import on: the libraries, the rules and the snapshot are all kept.
    with collection_paused():
        result, ruleset, language = _diagnose(
            snapshot, kernel_log or [], node, alerts or [], lang, now, rules, config
        )
    _print(result.diagnoses, fmt, language)
    errors: list[GpubotError] = [*ruleset.errors, *result.errors]
    report_errors(errors)
    if errors:
        raise typer.Exit(2)


def _diagnose(
    snapshot: list[Path],
    kernel_logs: list[Path],
    node: str | None,
    alerts: list[Path],
    lang: Lang | None,
    now: datetime | None,
    rules: Path | None,
    config: Path | None,
) -> tuple[DiagnoseResult, RuleSet, Lang]:
    from bot.roots import offline
    from bot.sources.alertmanager.payloads import load_alerts_file
    from bot.sources.alertmanager.understanding import alert_mapping

    settings = read_settings(config)
    language = lang or settings.lang
    # One diagnosis evaluates a fraction of the rules' CEL: the rest is not compiled, and
    # `rules lint` is what reports every expression that is not CEL.
    ruleset = offline.load_ruleset(settings, [rules] if rules else None, compile_all=False)
    if not ruleset.rules:
        # "No diagnosis" beside it would read as a healthy cluster: without rules nothing
        # was looked at.
        report_errors(list(ruleset.errors))
        if not ruleset.errors:
            stderr().print(f"error: {rules or settings.rules_dir}: no rules in it", markup=False)
        raise typer.Exit(2)
    inputs = offline.read_inputs(snapshot, kernel_logs, node, settings)
    for note in inputs.notes:
        stderr().print(f"note: {note}", markup=False)
    signals = list(inputs.signals)
    for path in alerts:
        signals.extend(
            load_alerts_file(
                path, settings.node_labels, alert_mapping(settings), settings.limits.alerts()
            )
        )
    moment = now or inputs.collected_at or utcnow()
    if moment.tzinfo is None:
        moment = moment.astimezone()
    from bot.process.ending import held

    # The snapshot and its facts are freed with the process, all at once (bot.process.ending).
    held.append(inputs)
    result = offline.diagnose_snapshot(
        inputs.snapshot, signals, ruleset, settings, moment, language, held
    )
    return result, ruleset, language


@handles_bad_input
def rules_lint(
    path: Annotated[Path | None, typer.Argument(help="Rules file or directory.")] = None,
    config: ConfigOption = None,
) -> None:
    """Validate rule files: schema, both languages, CEL, and every field the CEL reads."""
    from bot.roots import offline
    from bot.rules.linting import lint_rules

    settings = read_settings(config)
    ruleset = offline.load_ruleset(settings, [path] if path else None)
    problems: list[GpubotError] = [*ruleset.errors, *lint_rules(ruleset, settings)]
    report_errors(problems)
    count = len(ruleset.rules)
    if problems:
        stderr().print(f"{len(problems)} problem(s) in {len(ruleset.files)} file(s)", markup=False)
        raise typer.Exit(2)
    typer.echo(f"{count} rules in {len(ruleset.files)} file(s): OK")


@handles_bad_input
def rules_test(
    path: Annotated[Path | None, typer.Argument(help="Test file, or rules directory.")] = None,
    config: ConfigOption = None,
) -> None:
    """Run rule unit tests (YAML) and report each failure with its file and line."""
    from bot.roots import offline

    settings = read_settings(config)
    runs = offline.run_rule_tests(path or settings.rules_dir, settings)
    passed = failed = 0
    for run in runs:
        report_errors(list(run.rules.errors))
        for outcome in run.outcomes:
            if outcome.passed:
                passed += 1
                continue
            failed += 1
            for failure in outcome.failures:
                typer.echo(f"FAIL {outcome.where}: {outcome.name}: {failure}")
    typer.echo(f"{passed} passed, {failed} failed")
    if failed or any(run.rules.errors for run in runs) or not runs:
        raise typer.Exit(1 if failed else 2)
