"""Files other people send (a snapshot, alerts, a must-gather, a rule file) read within bounds,
as a user sees it: `gpubot` as a subprocess, one line on stderr, exit 2, a second of CPU and
a few MiB, never a traceback (issue 31, item 5: a 600-byte YAML file took 77 s and 3.0 GB).

What each child cost is measured by the kernel, for that child alone: `os.wait4` answers its
rusage (user + system CPU seconds, peak RSS in KiB), where `getrusage(RUSAGE_CHILDREN)` would
answer the largest child this test process ever had. CPU time, not wall time: the machine
runs other tests at once, and a second of CPU is what the child itself spent. Each child runs
under a 2 GiB address-space limit, so code that expands the bomb dies of MemoryError (and the
test fails) instead of calling the OOM killer on the machine.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.paths import HEALTHY, REPO

MUST_GATHER = REPO / "tests" / "data" / "must-gather" / "xid79-device-plugin-crashloop"
ADDRESS_SPACE = 2 << 30
DEADLINE_S = 30.0
CPU_S = 1.0
"""The whole command, start-up included (about 0.4 s of CPU for `gpubot diagnose` here)."""
RSS_GROWTH_KIB = 32 << 10
"""Peak RSS over that of the same command on a small valid input: 32 MiB."""


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str
    cpu_s: float
    max_rss_kib: int


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def gpubot(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None
) -> Ran:
    """`python -m bot.commands ARGS`, waited for with `os.wait4` (its own rusage)."""
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    given = tmp_path / "stdin"
    given.write_bytes(stdin or b"")
    with out.open("wb") as o, err.open("wb") as e, given.open("rb") as i:
        child = subprocess.Popen(
            [sys.executable, "-m", "bot.commands", *args],
            stdin=i,
            stdout=o,
            stderr=e,
            env={**os.environ, **(env or {})},
            cwd=tmp_path,  # the bot package installed (or on PYTHONPATH), not the cwd's
            preexec_fn=_limit_memory,
        )
        deadline = time.monotonic() + DEADLINE_S
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.kill(child.pid, signal.SIGKILL)
                os.wait4(child.pid, 0)
                pytest.fail(f"gpubot {' '.join(args)} still ran after {DEADLINE_S:.0f} s")
            time.sleep(0.02)
    child.returncode = os.waitstatus_to_exitcode(status)  # waited for here, not by Popen
    return Ran(
        child.returncode,
        out.read_text(errors="replace"),
        err.read_text(errors="replace"),
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss,
    )


@pytest.fixture(scope="module")
def baseline_rss_kib(tmp_path_factory: pytest.TempPathFactory) -> int:
    """Peak RSS of `gpubot diagnose` on the small healthy snapshot with an alert file."""
    tmp = tmp_path_factory.mktemp("baseline")
    alerts = tmp / "alerts.yaml"
    alerts.write_text("status: firing\nalerts: []\n")
    ran = gpubot(tmp, "diagnose", "--snapshot", str(HEALTHY), "--alerts", str(alerts))
    assert ran.returncode == 0, ran.stderr
    return ran.max_rss_kib


def laughs(indent: str) -> str:
    """A billion laughs: nine lines of nine aliases each, 387,420,489 strings once expanded,
    from 500 bytes. PyYAML composes an alias as the same node again and constructs it as the
    same object, so the loading is cheap; whatever walks the result (line numbers, a copy,
    an error message's repr) walks every copy."""
    lines = [f'{indent}a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for before, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{indent}{name}: &{name} [{','.join([f'*{before}'] * 9)}]")
    return "\n".join(lines) + "\n"


def _snapshot(tmp_path: Path) -> tuple[list[str], str]:
    path = tmp_path / "snapshot.yaml"
    path.write_text(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n"
        "    name: gpu-1\n    labels:\n      laughs:\n" + laughs("        ")
    )
    return ["diagnose", "--snapshot", str(path)], f"error: {path}:"


def _alerts(tmp_path: Path) -> tuple[list[str], str]:
    path = tmp_path / "alerts.yaml"
    path.write_text("status: firing\nalerts: []\nlaughs:\n" + laughs("  "))
    return ["diagnose", "--snapshot", str(HEALTHY), "--alerts", str(path)], f"error: {path}:"


def _must_gather(tmp_path: Path) -> tuple[list[str], str]:
    bundle = tmp_path / "must-gather"
    shutil.copytree(MUST_GATHER, bundle)
    pods = bundle / "gpu_operand_pods.yaml"
    pods.write_text(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata:\n"
        "    name: p\n    namespace: gpu-operator\n    labels:\n      laughs:\n"
        + laughs("        ")
    )
    return ["diagnose", "--snapshot", str(bundle)], f"error: {pods}:"


def _rules(tmp_path: Path) -> tuple[list[str], str]:
    path = tmp_path / "rules.yaml"
    path.write_text("rules: []\nlaughs:\n" + laughs("  "))
    return ["diagnose", "--snapshot", str(HEALTHY), "--rules", str(path)], f"error: {path}:"


BOMBS: dict[str, Callable[[Path], tuple[list[str], str]]] = {
    "snapshot": _snapshot,
    "alerts": _alerts,
    "must-gather": _must_gather,
    "rules": _rules,
}


@pytest.mark.parametrize("where", sorted(BOMBS))
def test_an_alias_bomb_is_one_line_exit_2_within_a_second_and_a_few_mib(
    tmp_path: Path, where: str, baseline_rss_kib: int
) -> None:
    args, starts = BOMBS[where](tmp_path)
    ran = gpubot(tmp_path, *args)
    assert ran.returncode == 2, ran.stderr[-2000:]
    assert ran.stderr.startswith(starts), ran.stderr[-2000:]
    assert len(ran.stderr.strip().splitlines()) == 1 and "Traceback" not in ran.stderr
    assert "alias" in ran.stderr and "Kubernetes" in ran.stderr, ran.stderr
    assert ran.cpu_s < CPU_S, f"{ran.cpu_s:.2f} s of CPU"
    assert ran.max_rss_kib - baseline_rss_kib < RSS_GROWTH_KIB, (
        f"peak RSS {ran.max_rss_kib} KiB against {baseline_rss_kib} KiB"
    )


# ---- what the parser would recurse on: an alias of itself, nesting, bytes that are not text --


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"status: firing\nalerts: []\nloop: &loop [*loop]\n", "a document without end"),
        (b"status: firing\nalerts: []\nx: " + b"[" * 150 + b"]" * 150 + b"\n", "100 levels"),
        (b'status: firing\nalerts: []\nx: "\xff\xfe"\n', "invalid YAML"),
    ],
    ids=["endless-alias", "deep", "not-utf-8"],
)
def test_an_alerts_file_the_parser_would_choke_on_is_one_line_exit_2(
    tmp_path: Path, content: bytes, fragment: str
) -> None:
    alerts = tmp_path / "alerts.yaml"
    alerts.write_bytes(content)
    ran = gpubot(tmp_path, "diagnose", "--snapshot", str(HEALTHY), "--alerts", str(alerts))
    assert ran.returncode == 2, ran.stderr[-2000:]
    assert ran.stderr.startswith(f"error: {alerts}") and fragment in ran.stderr, ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1 and "Traceback" not in ran.stderr


def test_a_json_snapshot_nested_past_the_decoder_is_one_line_exit_2(tmp_path: Path) -> None:
    """msgspec guards its recursion with RecursionError, which is no DecodeError."""
    deep = tmp_path / "deep.json"
    deep.write_text('{"items": ' + "[" * 100_000 + "]" * 100_000 + "}")
    ran = gpubot(tmp_path, "diagnose", "--snapshot", str(deep))
    assert ran.returncode == 2, ran.stderr[-2000:]
    assert ran.stderr.strip() == (
        f"error: {deep}: nested too deep to read (a Kubernetes object nests a dozen levels or so)"
    )


# ---- sizes: each kind refused by its limit, named with the setting that raises it -----------


def _padded_json(path: Path, mib: float) -> Path:
    """The healthy snapshot, padded with spaces (still the same JSON) to `mib` MiB."""
    text = HEALTHY.read_text()
    path.write_text(text + " " * (int(mib * (1 << 20)) - len(text)))
    return path


def _yaml_of_healthy(path: Path, mib: float) -> Path:
    text = "# a comment line to pad the file\n"
    body = HEALTHY.read_text()  # JSON is YAML: as a YAML file it keeps its meaning
    path.write_text("items: " + json.dumps(json.loads(body)["items"]) + "\n")
    with path.open("a") as file:
        file.write(text * (int(mib * (1 << 20)) // len(text)))
    return path


def _json_snapshot(tmp_path: Path) -> tuple[list[str], str | None]:
    path = _padded_json(tmp_path / "snapshot.json", 1.5)
    return ["diagnose", "--snapshot", str(path)], None


def _stdin_snapshot(tmp_path: Path) -> tuple[list[str], str | None]:
    _padded_json(tmp_path / "piped.json", 1.5)
    return ["diagnose", "--snapshot", "-"], "piped.json"


def _yaml_snapshot(tmp_path: Path) -> tuple[list[str], str | None]:
    path = _yaml_of_healthy(tmp_path / "snapshot.yaml", 1.5)
    return ["diagnose", "--snapshot", str(path)], None


def _alerts_file(tmp_path: Path) -> tuple[list[str], str | None]:
    path = tmp_path / "alerts.json"
    path.write_text('{"status": "firing", "alerts": []}' + " " * (3 << 19))
    return ["diagnose", "--snapshot", str(HEALTHY), "--alerts", str(path)], None


def _must_gather_file(tmp_path: Path) -> tuple[list[str], str | None]:
    bundle = tmp_path / "must-gather"
    shutil.copytree(MUST_GATHER, bundle)
    with (bundle / "gpu_nodes.descr").open("a") as descr:
        descr.write("\n" * (3 << 19))
    return ["diagnose", "--snapshot", str(bundle)], None


def _kernel_log(tmp_path: Path) -> tuple[list[str], str | None]:
    """2 MiB of newlines in 2 KiB of gzip: unpacked only up to the limit, then refused."""
    log = tmp_path / "kern.log.gz"
    log.write_bytes(gzip.compress(b"\n" * (2 << 20), compresslevel=9))
    args = ["diagnose", "--snapshot", str(HEALTHY), "--kernel-log", str(log), "--node", "gpu-a2"]
    return args, None


OVERSIZED: dict[str, tuple[Callable[[Path], tuple[list[str], str | None]], str, str, str]] = {
    # name: (the input, its setting, its kind as the message says it, the file it names)
    "json-snapshot": (_json_snapshot, "snapshot_mib", "a JSON snapshot", "snapshot.json"),
    "stdin": (_stdin_snapshot, "snapshot_mib", "a JSON snapshot", "stdin"),
    "yaml-snapshot": (_yaml_snapshot, "yaml_snapshot_mib", "a YAML snapshot", "snapshot.yaml"),
    "alerts": (_alerts_file, "alerts_mib", "an alerts file", "alerts.json"),
    "must-gather": (
        _must_gather_file,
        "must_gather_file_mib",
        "a file of a must-gather",
        "must-gather/gpu_nodes.descr",
    ),
    "kernel-log": (
        _kernel_log,
        "kernel_log_mib",
        "a kernel log or bug report, unpacked",
        "kern.log.gz",
    ),
}


@pytest.mark.parametrize("name", sorted(OVERSIZED))
def test_an_input_over_its_limit_is_refused_naming_the_limit_and_how_to_raise_it(
    tmp_path: Path, name: str
) -> None:
    """Each limit lowered to 1 MiB (`GPUBOT_LIMITS__*`, as a person would raise it) against
    an input of 1.5 MiB or more: refused in one line, quickly; raised, the same input reads."""
    build, setting, kind, named = OVERSIZED[name]
    args, piped = build(tmp_path)
    stdin = (tmp_path / piped).read_bytes() if piped else None
    env_name = f"GPUBOT_LIMITS__{setting.upper()}"
    ran = gpubot(tmp_path, *args, env={env_name: "1"}, stdin=stdin)
    assert ran.returncode == 2, ran.stderr[-2000:]
    where = named if named == "stdin" else str(tmp_path / named)
    assert ran.stderr.startswith(f"error: {where}: "), ran.stderr
    assert f"over the 1 MiB limit for {kind}" in ran.stderr or (
        f"more than 1 MiB, the limit for {kind}" in ran.stderr
    ), ran.stderr
    assert f"raise limits.{setting} in the settings file, or run with {env_name}=" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1 and "Traceback" not in ran.stderr
    assert ran.cpu_s < CPU_S, f"{ran.cpu_s:.2f} s of CPU"
    raised = gpubot(tmp_path, *args, env={env_name: "128"}, stdin=stdin)
    assert raised.returncode == 0, raised.stderr[-2000:]
