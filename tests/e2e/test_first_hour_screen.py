"""The console as a new operator meets it in the first hour (issue 19: items 1, 7, 8, 9):
`gpubot demo` and `demo --replay` run as processes at 80 and 120 columns, with and without a
person at a terminal, in English and Chinese."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

import pytest
from rich.cells import cell_len

from bot.config import load_settings
from bot.model import Diagnosis, Lang
from bot.roots import offline

_BORDER = "│┃╭╰╮╯─━┏┗┓┛┡┩╇┣┫┳┻╋"


def gpubot(*args: str, columns: int = 80, answers: str | None = None) -> str:
    """stdout of `gpubot ARGS` at `columns`; with `answers`, its stdin is a terminal that
    types them (stdout stays a pipe, so rich draws for `columns`)."""
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50"}
    if answers is None:
        done = subprocess.run(
            [sys.executable, "-m", "bot.commands", *args],
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout
    person, terminal = pty.openpty()
    try:
        # A terminal's line discipline keeps each typed line until the prompt reads it.
        os.write(person, answers.encode())
        done = subprocess.run(
            [sys.executable, "-m", "bot.commands", *args],
            capture_output=True,
            text=True,
            timeout=180,
            stdin=terminal,
            env=env,
        )
    finally:
        os.close(terminal)
        os.close(person)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _lines(text: str) -> list[str]:
    """Each line without the panel and table borders around it."""
    return [line.strip().strip(_BORDER).strip() for line in text.splitlines()]


# -- item 1: commands are pasted whole; titles fit ------------------------------------------


def _replayed_diagnoses(lang: Lang) -> list[Diagnosis]:
    settings = load_settings(None)
    found: list[Diagnosis] = []
    for scenario in offline.demo_scenarios(settings):
        test = scenario.test.model_copy(update={"lang": lang})
        outcome = offline.run_rule_test(
            test, scenario.where, scenario.base_dir, scenario.rules, settings
        )
        found += outcome.diagnoses
    return found


@pytest.mark.parametrize(("columns", "lang"), [(80, "en"), (120, "zh"), (80, "zh")])
def test_replayed_runbook_commands_are_whole_lines_and_titles_fit(columns: int, lang: str) -> None:
    out = gpubot("demo", "--replay", "--lang", lang, columns=columns)
    lines = _lines(out)
    diagnoses = _replayed_diagnoses(Lang(lang))
    commands = {c for d in diagnoses for step in d.runbook for c in step.commands}
    assert any(len(c) > columns - 30 for c in commands)  # long enough to have wrapped
    for command in commands:
        assert f"$ {command}" in lines, f"{command!r} is not one line at {columns} columns"
    for d in diagnoses:
        # The rule id names the rule in every answer; a cut title lost it.
        assert d.rule in out, d.rule
    too_wide = [line for line in out.splitlines() if cell_len(line) > columns and "$ " not in line]
    assert too_wide == []


def test_the_live_demo_prints_its_commands_whole_at_80_columns() -> None:
    out = gpubot("demo", "--pause", "0.2", "--approve-as", "alice", columns=80)
    lines = _lines(out)
    assert "$ kubectl get node gpu-a2 -o jsonpath='{.status.allocatable}'" in lines
    assert "$ journalctl -k --since '30 min ago' | grep -i -E 'nvrm|xid|nvidia'" in lines
    assert "$ kubectl drain gpu-a2 --ignore-daemonsets --delete-emptydir-data" in lines


# -- item 7: every word in the chosen language --------------------------------------------

ENGLISH = re.compile(
    r"\b(proposed|proposes|approve|approved|health gate|passed|incident|resolved|steady|"
    r"running|evicted|drained|uncordoned|cordoned|request|expires|when|who|what|details|"
    r"repair|rebooted|falls off|crash-looping|out of service|executing|diagnosed|awaiting|"
    r"state|proposal|approval|gate|action-start|action-progress|action-result|Duration|"
    r"Seen|Decided|Done|Outcome|back in service|denied|evicts nothing|lose progress|not run|"
    r"blast radius|out now)\b",
)
"""Words of gpubot's own sentences, as they read in English (case kept: `Running` is a pod
phase a Chinese sentence may name)."""


def _prose(out: str) -> str:
    """What the person reads as sentences: commands, flags, the watches' signal lines (Kubernetes
    and alert names) and the cluster's own evidence lines left out. The health gate's item
    lines stay: they are gpubot's sentences about the evidence, in the reader's language."""
    kept = []
    for line in out.splitlines():
        if "$ " in line or "⚡" in line or "•" in line:
            continue
        line = re.sub(r"`[^`]*`", "", line)
        line = re.sub(r"kubectl [a-z]+ [\w.-]+( --[\w-]+)*", "", line)
        kept.append(re.sub(r"--[\w-]+", "", line))
    return "\n".join(kept)


def test_demo_in_chinese_says_no_english_sentence() -> None:
    out = gpubot("demo", "--lang", "zh", "--pause", "0.2", "--approve-as", "alice", columns=120)
    assert "事件 1 已解决" in out and "健康门禁通过" in out and "稳定运行" in out
    words = sorted({m.group(0).lower() for m in ENGLISH.finditer(_prose(out))})
    assert words == [], words
    # Every item the health gate checked reads in Chinese, not only the verdict.
    items = [line for line in out.splitlines() if re.match(r"\s*[✓✗○] ", line)]
    assert items and all(re.search(r"[\u4e00-\u9fff]", line) for line in items), items
    # No lone full stop on a line of its own.
    assert "。" not in _lines(out)


# -- item 8: the demo's loose ends ------------------------------------------------------------


def test_demo_without_a_person_says_how_to_approve_and_ends_with_a_summary() -> None:
    out = gpubot("demo", "--pause", "0.2", columns=120)
    assert "--approve-as NAME" in out
    assert "-drain-" not in out  # a request id that is gone once the demo ends
    assert "incident 1 still open — gpu-a2" in out
    assert "drained" not in out


def test_demo_asks_every_proposal_and_takes_y() -> None:
    out = gpubot("demo", "--pause", "0.2", columns=120, answers="maybe\ny\ny\ny\ny\n")
    assert "Answer y (approve) or n (deny)." in out
    assert "drained gpu-a2" in out and "uncordoned gpu-a2" in out
    assert "gpubot proposes cordoning gpu-a3" in out and "cordoned gpu-a3" in out
    assert "gpubot proposes cordoning gpu-a4" in out
    # The pool's budget (one node out at a time) holds gpu-a4 while gpu-a3 is out.
    assert "may have 1 of 4 nodes out" in out
    assert "incident 1 resolved — gpu-a2" in out


def test_demo_denied_ends_with_a_summary() -> None:
    out = gpubot("demo", "--pause", "0.2", columns=120, answers="n\n")
    assert "drain gpu-a2 denied: the node stays as it is" in out
    assert "incident 1 still open — gpu-a2" in out
    assert "you denied kubectl drain gpu-a2" in out
    assert "drained" not in out


@pytest.fixture(scope="module")
def approved() -> str:
    """One whole loop, approved by alice, wide enough that no sentence wraps."""
    return gpubot("demo", "--pause", "0.2", "--approve-as", "alice", columns=400)


def test_demo_repair_and_gate_say_what_happened_and_the_summary_says_it_once(
    approved: str,
) -> None:
    out = approved
    repair = out.split("repair: gpu-a2 is rebooted")[1].split("health gate for gpu-a2")[0]
    assert "gpu-a2 rebooted: Ready True, 8 of 8 GPUs allocatable" in repair
    gate = out.split("health gate for gpu-a2 (runbook step 9)")[1]
    assert "✓ gpus-allocatable: 8 of 8 GPUs allocatable" in gate
    assert "✓ node-ready" in gate
    summary = out.split("incident 1 resolved — gpu-a2")[1].split("when (UTC)")[0]
    assert summary.count("health gate passed for gpu-a2") == 1


# -- item 9: the drain proposal says its flags and why -------------------------------------


def test_the_drain_proposal_says_which_flags_and_why(approved: str) -> None:
    out = approved
    said = [line for line in out.splitlines() if "proposed: kubectl drain gpu-a2" in line]
    proposal = said[0]  # as it is proposed; the timeline at the end says it again
    assert "--ignore-daemonsets:" in proposal
    assert "no --delete-emptydir-data:" in proposal and "runbook step 3" in proposal
    # ...and it is what runs.
    assert "running `kubectl drain gpu-a2 --ignore-daemonsets` (approved by alice)" in out
