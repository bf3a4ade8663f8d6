"""`gpubot drill` as an operator runs it: a drill that holds passes, one that does not fails
with the check that broke, and a drill file that cannot run is refused before anything
starts. The shipped drills themselves run once, in CI (`.ci/run`), not per test here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.config import bundled_dir
from bot.drills.spec import drill_files, load_drill
from bot.errors import InputError
from tests.helpers.paths import REPO

CRASHLOOP = """\
drill: plugin-crashloop-short
about: the device plugin on gpu-a2 crash-loops
script:
  - fault: plugin-crashloop
    node: gpu-a2
    alert_after: null
  - wait_for: {diagnosis: device-plugin-crashloop, node: gpu-a2}
    within: 30s
expect:
  incidents: 1
  messages: 1
  first: {rule: %(rule)s}
"""


def drill(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.commands", "drill", *args],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env={"COLUMNS": "160", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )


@pytest.fixture(scope="module")
def right_and_wrong(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """Two drills in one run (each world takes seconds to build): one whose expectation
    holds, one that expects the wrong rule first."""
    folder = tmp_path_factory.mktemp("drills")
    (folder / "a-right.yaml").write_text(CRASHLOOP % {"rule": "device-plugin-crashloop"})
    wrong = CRASHLOOP % {"rule": "gpu-capacity-zero"}
    (folder / "b-wrong.yaml").write_text(wrong.replace("plugin-crashloop-short", "wrong-first"))
    return drill(str(folder), "--prometheus", "off")


def test_a_failed_check_fails_the_run_and_names_what_came_instead(
    right_and_wrong: subprocess.CompletedProcess[str],
) -> None:
    done = right_and_wrong
    assert done.returncode == 1, done.stdout + done.stderr
    assert "✗ first offer on gpu-a2: gpu-capacity-zero (the first was device-plugin-crashloop)" in (
        done.stdout
    )
    rows = [line for line in done.stdout.splitlines() if line.startswith("│ ")]
    assert any("plugin-crashloop-short" in r and "pass" in r for r in rows), rows
    assert any("wrong-first" in r and "FAIL" in r for r in rows), rows


def test_without_prometheus_the_operator_is_told_the_gate_cannot_pass(
    right_and_wrong: subprocess.CompletedProcess[str],
) -> None:
    assert "no Prometheus" in right_and_wrong.stderr


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("drill: x\nabout: y\nscript: []\nexpect: {}\n", "script"),
        (CRASHLOOP.replace("within: 30s", "within: soon") % {"rule": "r"}, "not a duration"),
        (CRASHLOOP.replace("fault: plugin-crashloop", "fault: [1]") % {"rule": "r"}, "script"),
        (CRASHLOOP % {"rule": "r"} + "surprise: 1\n", "surprise"),
    ],
)
def test_a_drill_file_that_cannot_run_is_one_line_naming_where_and_nothing_starts(
    tmp_path: Path, text: str, said: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as refused:
        load_drill(path)
    assert said in str(refused.value) and str(path) in str(refused.value)
    done = drill(str(path))
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1
    assert "drill " not in done.stdout  # refused before any world was built


def test_every_shipped_drill_loads_and_names_only_known_faults_rules_and_actions() -> None:
    from bot.config import Settings
    from bot.roots.offline import load_ruleset
    from gpusim.faults import FAULTS

    rules = {r.spec.id for r in load_ruleset(Settings()).rules}
    shipped = drill_files(bundled_dir("drills"))
    assert len(shipped) >= 10
    for path in shipped:
        loaded = load_drill(path)
        for step in loaded.script:
            fault = getattr(step, "fault", None) or getattr(step, "repair", None)
            assert fault is None or fault in FAULTS, (path, fault)
        named = [e.diagnosis for e in [*loaded.expect.sequence, *loaded.expect.never]]
        named += [loaded.expect.first.rule] if loaded.expect.first else []
        assert {n for n in named if n} <= rules, path
