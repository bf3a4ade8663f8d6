"""The offline composition root: rules, a snapshot and alerts in, diagnoses out (`gpubot
diagnose`, `rules test`, `demo --replay`). Nothing here opens a store, a socket or a
cluster; `gpubot serve` is composed in `bot/roots/serve.py`, the live demo in
`bot/roots/demo.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from bot.diagnose import DiagnoseResult, diagnose
from bot.errors import InputError
from bot.facts.collecting import collect_facts, resolve_signal_nodes
from bot.facts.snapshots import Snapshot, parse_snapshot, read_objects_file
from bot.model import Lang, Signal
from bot.rules.loading import RuleSet, load_rules

if TYPE_CHECKING:
    from bot.config import Settings
    from bot.kube_objects import Obj
    from bot.rules.testing import RuleTest, TestOutcome

# The must-gather and kernel-log readers, the rule-test runner and the alert intake are
# imported by the functions that use them: `gpubot diagnose` of a kubectl snapshot starts
# without them (benchmarks/startup.py).


def load_ruleset(
    settings: Settings, paths: list[Path] | None = None, *, compile_all: bool = True
) -> RuleSet:
    return load_rules(paths or [settings.rules_dir], compile_all=compile_all)


def diagnose_snapshot(
    snapshot: Snapshot,
    signals: list[Signal],
    rules: RuleSet,
    settings: Settings,
    now: datetime,
    lang: Lang | None = None,
    held: list[object] | None = None,
) -> DiagnoseResult:
    """`held`, if given, gets the facts: a caller that ends its process without freeing
    them (`bot.process.ending`) keeps them from being freed one by one on return."""
    signals = resolve_signal_nodes(snapshot, signals)
    facts = collect_facts(snapshot, signals, settings, now)
    if held is not None:
        held.append(facts)
    return diagnose(facts, signals, rules, settings, lang)


@dataclass
class Inputs:
    """What `gpubot diagnose` was given, read: one snapshot, the signals, what to say aside."""

    snapshot: Snapshot
    signals: list[Signal]
    notes: list[str]
    """What was skipped or is missing from the inputs (a must-gather's unreadable parts)."""
    collected_at: datetime | None = None
    """When the inputs were collected, when they say (a must-gather's bug reports)."""


def read_inputs(
    paths: list[Path], kernel_logs: list[Path], node: str | None, settings: Settings
) -> Inputs:
    """Files of kubectl output (JSON or YAML, `-` for stdin), GPU Operator must-gather
    folders, and kernel logs of one node, as one snapshot with its signals; each file within
    the size limit of its kind (`settings.limits`)."""
    if kernel_logs and not node:
        raise InputError("--kernel-log", "give --node NODE: a kernel log does not name its node")
    objects: list[Obj] = []
    signals: list[Signal] = []
    notes: list[str] = []
    collected: datetime | None = None
    for path in paths:
        if path.is_dir():
            from bot.facts.mustgather import read_must_gather

            bundle = read_must_gather(path, settings.limits)
            objects += bundle.objects
            signals += bundle.signals
            notes += [f"{path}: skipped {f}: {why}" for f, why in bundle.skipped]
            notes += [f"{path}: not known: {what}" for what in bundle.missing]
            if bundle.collected_at is not None:
                collected = max(collected or bundle.collected_at, bundle.collected_at)
        else:
            objects += read_objects_file(path, for_facts=True, limits=settings.limits)
    for log in kernel_logs:
        from bot.facts.kernel import kernel_signals, read_log_file

        read = read_log_file(log, settings.limits.kernel_log())
        if read.problem:
            notes.append(f"{log}: {read.problem}")
        signals += kernel_signals(read.text, node or "", str(log))
    where = ", ".join(str(p) for p in paths) or "snapshot"
    return Inputs(Snapshot.from_items(objects, where), signals, notes, collected)


def rule_test_files(path: Path) -> list[Path]:
    """A test file, or every test file under `tests/` of a rules directory: each `*.yaml`
    there, and each case folder's `test.yaml` below it (the corpus of real reports)."""
    if path.is_file():
        return [path]
    tests_dir = path / "tests" if (path / "tests").is_dir() else path
    return sorted(tests_dir.glob("*.yaml")) + sorted(tests_dir.glob("*/*/test.yaml"))


def rules_dir_for(test_file: Path, declared: str | None) -> Path:
    """The rules a test file tests: as it declares, else those of the `tests/` folder it is in."""
    if declared:
        return (test_file.parent / declared).resolve()
    for folder in test_file.parents:
        if folder.name == "tests":
            return folder.parent
    return test_file.parent.parent


@dataclass
class RuleTestRun:
    file: Path
    rules: RuleSet
    outcomes: list[TestOutcome]


def build_case(test: RuleTest, base_dir: Path, settings: Settings) -> tuple[Snapshot, list[Signal]]:
    """A rule test's snapshot (base plus edits) and alerts, as the pipeline would receive them."""
    from bot.rules.testing import apply_edits, base_snapshot
    from bot.sources.alertmanager.payloads import signals_from_payload, validate_payload
    from bot.sources.alertmanager.understanding import alert_mapping

    edited = apply_edits(base_snapshot(base_dir / test.snapshot), test.edits)
    payload = validate_payload(
        {"status": "firing", "alerts": [{"status": "firing", **a} for a in test.alerts]},
        f"{test.name}: alerts",
    )
    return parse_snapshot(edited, test.snapshot), signals_from_payload(
        payload, settings.node_labels, alert_mapping(settings)
    )


def run_rule_test(
    test: RuleTest, where: str, base_dir: Path, rules: RuleSet, settings: Settings
) -> TestOutcome:
    try:
        snapshot, signals = build_case(test, base_dir, settings)
        result = diagnose_snapshot(snapshot, signals, rules, settings, test.now, test.lang)
    except InputError as exc:
        # Name the test, not the base snapshot its edits broke.
        raise InputError(where, f"{test.name}: {exc}") from exc
    from bot.rules.testing import TestOutcome, check

    failures = [f"rule error: {e}" for e in result.errors]
    failures += check(test, result.diagnoses)
    return TestOutcome(test.name, where, failures, result.diagnoses)


def run_rule_tests(path: Path, settings: Settings) -> list[RuleTestRun]:
    from bot.rules.testing import load_test_file

    runs = []
    cache: dict[Path, RuleSet] = {}
    for file in rule_test_files(path):
        parsed, where = load_test_file(file)
        rules_dir = rules_dir_for(file, parsed.rules_dir)
        if rules_dir not in cache:
            cache[rules_dir] = load_rules([rules_dir])
        rules = cache[rules_dir]
        outcomes = [
            run_rule_test(test, where(i), file.parent, rules, settings)
            for i, test in enumerate(parsed.tests)
        ]
        runs.append(RuleTestRun(file, rules, outcomes))
    return runs


@dataclass
class DemoScenario:
    name: str
    test: RuleTest
    where: str
    base_dir: Path
    rules: RuleSet


def demo_scenarios(settings: Settings) -> list[DemoScenario]:
    """The rule tests marked `demo: true`: real snapshots, replayed through the pipeline."""
    from bot.rules.testing import load_test_file

    rules = load_ruleset(settings)
    scenarios = []
    for file in rule_test_files(settings.rules_dir):
        parsed, where = load_test_file(file)
        for index, test in enumerate(parsed.tests):
            if test.demo:
                scenarios.append(DemoScenario(test.name, test, where(index), file.parent, rules))
    return scenarios
