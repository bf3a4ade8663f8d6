"""What `gpubot diagnose` prints must not change when the fleet-scale work makes it faster.

The hashes below were taken from the code before that work (main at f5517bc): the output of a
seeded 300-node fleet snapshot in each format, and every rule test's diagnoses. The text
format's and the rule tests' were taken again from main at e9662ed, after deliberate changes
of wording and layout there (console panels, runbook below the panel, drain proposal texts).
A change that alters a single byte of what the on-call reads fails here; a deliberate change
of wording updates the hash in the same commit, saying why.

One thing is compared in a canonical order rather than as printed: the lines within one
evidence list. An evidence expression that maps over a CEL map (`pool.driver_versions.map(...)`)
yields its lines in cel-cpp's hash order, which changes from one process to the next (on main
too): the lines are the same, their order is not."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import diagnosis_json
from bot.config import Settings
from bot.roots.offline import run_rule_tests
from gpusim.scenarios import fleet_cluster
from tests.helpers.paths import REPO, RULES

NOW = "2026-12-02T03:00:00Z"
GPUBOT = [sys.executable, "-m", "bot.cli", "diagnose", "--now", NOW]

FLEET_OUTPUT = {
    "json": "fb4b263c0d06644286c0f620202b5418f27bc47dbff4c848153d5dfbfa6f8afb",
    "markdown": "18bbfa800ed45a40eed2494412e678ba5d03d6940505f314cb89e9f394024ff3",
    "text": "0934922fd8b3cd13ade71a0d247a5bb5fae501043f020b42a794a3119997cd8c",
}
RULE_TEST_DIAGNOSES = "c79d8b018b5fbaf84ba412f5ae13b5e60772653f76582af2ed91eb3b179157db"


@pytest.fixture(scope="module")
def fleet_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("fleet")
    cluster, alerts = fleet_cluster(300)
    snapshot, payload = folder / "snapshot.json", folder / "alerts.json"
    snapshot.write_text(json.dumps(cluster))
    payload.write_text(json.dumps(alerts))
    return snapshot, payload


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(output: bytes, fmt: str) -> bytes:
    """The output with each evidence list's lines sorted (see the module's docstring)."""
    if fmt == "json":
        told = json.loads(output)
        for diagnosis in told["diagnoses"]:
            diagnosis["evidence"] = sorted(diagnosis["evidence"])
        return json.dumps(told, ensure_ascii=False, indent=2).encode()
    bullet = "- " if fmt == "markdown" else "\u2022 "
    lines: list[str] = []
    run: list[str] = []
    for line in [*output.decode().split("\n"), None]:
        if line is not None and bullet in line[:40]:
            run.append(line)
            continue
        # The text format's first bullet carries the "Evidence" label: a run of several
        # keeps only what follows each bullet, sorted.
        lines += sorted(r.split(bullet, 1)[1] for r in run) if len(run) > 1 else run
        run = []
        if line is not None:
            lines.append(line)
    return "\n".join(lines).encode()


@pytest.mark.parametrize("fmt", sorted(FLEET_OUTPUT))
def test_a_fleet_snapshot_is_diagnosed_byte_for_byte_as_before(
    fleet_files: tuple[Path, Path], fmt: str
) -> None:
    snapshot, alerts = fleet_files
    done = subprocess.run(
        [*GPUBOT, *["--snapshot", str(snapshot), "--alerts", str(alerts), "--format", fmt]],
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "120", "TERM": "dumb"},
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b"gpu-a" in done.stdout
    assert _sha(_canonical(done.stdout, fmt)) == FLEET_OUTPUT[fmt]


def test_every_rule_tests_diagnoses_are_as_before() -> None:
    outcomes = [o for run in run_rule_tests(RULES, Settings()) for o in run.outcomes]
    assert outcomes and all(o.passed for o in outcomes)
    # Where each test is, relative to the checkout: the same hash in any clone.
    told = [
        [o.where.removeprefix(f"{REPO}/"), o.name, [diagnosis_json(d) for d in o.diagnoses]]
        for o in outcomes
    ]
    for diagnosis in (d for _, _, diagnoses in told for d in diagnoses):
        diagnosis["evidence"] = sorted(diagnosis["evidence"])
    assert _sha(json.dumps(told, ensure_ascii=False).encode()) == RULE_TEST_DIAGNOSES
