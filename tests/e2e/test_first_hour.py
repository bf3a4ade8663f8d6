"""The first hour of a new operator (issue 19): what a person sees from the CLI when a
setting is wrong or missing. Real processes, a fresh HOME and working folder for each test,
so nothing of the developer's own settings leaks in."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers.paths import HEALTHY
from tests.helpers.processes import (
    NODE,
    TOKEN,
    Serve,
    cluster,
    post_alert,
    running_gpubot,
    simulator,
    wait_for,
    xid_alert,
)

BAD_STORE_URLS = ["notaurl", "foo://bar", "mysql://gpubot@db.example.com/gpubot"]


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GPUBOT_") and k not in ("KUBECONFIG", "XDG_CONFIG_HOME")
    }
    return {**env, "HOME": str(home), "COLUMNS": "200", **extra}


def gpubot(
    *args: str, cwd: Path, home: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.commands", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=_env(home or cwd, **env),
        stdin=subprocess.DEVNULL,
    )


def _one_line_error(done: subprocess.CompletedProcess[str], *said: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for text in said:
        assert text in lines[0], done.stderr


# ---- item 2: one line, exit 2, for a bad store URL or kubeconfig ------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["timeline", "1"],
        ["digest"],
        ["db", "upgrade"],
        ["demo"],
        ["approve", "1-x", "--as", "a"],
    ],
)
def test_a_bad_store_url_is_one_line_and_exit_2(command: list[str], tmp_path: Path) -> None:
    for url in BAD_STORE_URLS:
        done = gpubot(*command, "--store-url", url, cwd=tmp_path)
        _one_line_error(done, "store_url")
    assert list(tmp_path.iterdir()) == []


def test_serve_with_a_bad_store_url_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = gpubot(
        "serve",
        "--kube-url",
        "http://127.0.0.1:1",
        "--store-url",
        "notaurl",
        cwd=tmp_path,
        GPUBOT_SERVE__BEARER_TOKEN=TOKEN,
    )
    _one_line_error(done, "store_url", "not a database URL")


@pytest.mark.parametrize("kubeconfig", ["missing", "garbage", "none at all"])
def test_serve_with_an_unusable_kubeconfig_is_one_line_and_creates_nothing(
    kubeconfig: str, tmp_path: Path
) -> None:
    args = ["serve", "--store-url", f"sqlite:///{tmp_path / 'gpubot.db'}"]
    if kubeconfig == "missing":
        args += ["--kubeconfig", str(tmp_path / "nowhere")]
    elif kubeconfig == "garbage":
        (tmp_path / "kc").write_text("clusters: [\n")
        args += ["--kubeconfig", str(tmp_path / "kc")]
    done = gpubot(*args, cwd=tmp_path, GPUBOT_SERVE__BEARER_TOKEN=TOKEN)
    _one_line_error(done, "kubeconfig")
    assert not (tmp_path / "gpubot.db").exists()


# ---- item 4: read-only commands never create a store ----------------------------------------


@pytest.mark.parametrize(
    "command", [["timeline", "gpu-a1"], ["digest"], ["approve", "1-drain-gpu-a1", "--as", "alice"]]
)
def test_read_only_commands_say_the_store_does_not_exist_and_create_none(
    command: list[str], tmp_path: Path
) -> None:
    done = gpubot(*command, cwd=tmp_path)
    _one_line_error(done, "no gpubot store at sqlite:///gpubot.db", "does not exist")
    assert list(tmp_path.iterdir()) == []


def test_digest_does_not_build_a_schema_in_an_empty_database(tmp_path: Path) -> None:
    import sqlite3

    sqlite3.connect(tmp_path / "empty.db").close()
    done = gpubot("digest", "--store-url", f"sqlite:///{tmp_path / 'empty.db'}", cwd=tmp_path)
    _one_line_error(done, "no gpubot store", "empty")
    with sqlite3.connect(tmp_path / "empty.db") as db:
        assert db.execute("select name from sqlite_master").fetchall() == []


# ---- item 3: settings found the same way; init; approvals by default --------------------------


def test_init_writes_settings_every_command_then_reads(tmp_path: Path) -> None:
    done = gpubot("init", "--approver", "alice", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    written = tmp_path / ".config" / "gpubot" / "settings.yaml"
    assert f"wrote {written}" in done.stdout
    token = (tmp_path / ".config" / "gpubot" / "webhook-token").read_text().strip()
    assert len(token) >= 32
    assert oct((tmp_path / ".config" / "gpubot" / "webhook-token").stat().st_mode)[-3:] == "600"
    # No --config: the store named in the file is the one looked at, from any folder.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = gpubot("timeline", "gpu-a1", cwd=elsewhere, home=tmp_path)
    _one_line_error(done, f"sqlite:///{tmp_path / '.config' / 'gpubot' / 'gpubot.db'}")
    # GPUBOT_CONFIG beats the default file; --config beats GPUBOT_CONFIG.
    other = tmp_path / "other.yaml"
    other.write_text(f"store_url: sqlite:///{tmp_path / 'other.db'}\n")
    done = gpubot("digest", cwd=elsewhere, home=tmp_path, GPUBOT_CONFIG=str(other))
    _one_line_error(done, str(tmp_path / "other.db"))
    third = tmp_path / "third.yaml"
    third.write_text(f"store_url: sqlite:///{tmp_path / 'third.db'}\n")
    done = gpubot(
        "digest", "--config", str(third), cwd=elsewhere, home=tmp_path, GPUBOT_CONFIG=str(other)
    )
    _one_line_error(done, str(tmp_path / "third.db"))
    assert list(elsewhere.iterdir()) == []
    # A second init does not overwrite the first.
    again = gpubot("init", cwd=tmp_path)
    _one_line_error(again, "exists")


def test_init_names_the_login_as_approver_by_default(tmp_path: Path) -> None:
    import yaml

    done = gpubot(
        "init", "--config", str(tmp_path / "s.yaml"), cwd=tmp_path, USER="carol", LOGNAME="carol"
    )
    assert done.returncode == 0, done.stderr
    written = yaml.safe_load((tmp_path / "s.yaml").read_text())
    approvals = written["remediation"]["approvals"]
    assert [approvals[a]["users"] for a in ("cordon", "drain", "uncordon")] == [["carol"]] * 3
    assert written["serve"]["bearer_token_file"] == str(tmp_path / "webhook-token")


# ---- item 10: diagnose without rules ---------------------------------------------------------


def test_diagnose_with_a_missing_rules_folder_prints_only_the_error(tmp_path: Path) -> None:
    done = gpubot("diagnose", "--snapshot", str(HEALTHY), "--rules", "/nonexistent", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip() == "error: /nonexistent: No such file or directory"


# ---- item 11: help -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["approve"], ["serve"], ["timeline"], ["init"], []])
def test_help_shows_no_type_placeholders_and_documents_every_option(
    command: list[str], tmp_path: Path
) -> None:
    done = gpubot(*command, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "<bool>" not in done.stdout and "{request}" not in done.stdout
    if command == ["approve"]:
        assert " approve [OPTIONS] REQUEST_ID\n" in done.stdout, done.stdout
    if command == ["serve"]:
        for option in ("--kubeconfig FILE", "--in-cluster", "--store-url URL", "console"):
            assert option in done.stdout, done.stdout
        assert "GPUBOT_CONFIG" in done.stdout


ARGUMENTS = [
    (["approve"], "REQUEST_ID"),
    (["deny"], "REQUEST_ID"),
    (["timeline"], "INCIDENT|NODE"),
    (["rules", "lint"], "[PATH]"),
    (["rules", "test"], "[PATH]"),
    (["drill"], "[PATHS]..."),
    (["sim", "inject"], "FAULT"),
    (["sim", "repair"], "FAULT"),
    (["alerts", "explain"], "PAYLOAD"),
]


@pytest.mark.parametrize(("command", "shown"), ARGUMENTS)
def test_help_names_each_argument_plainly_as_you_would_type_it(
    command: list[str], shown: str, tmp_path: Path
) -> None:
    """typer wrote `{REQUEST}` in the usage line and `request <str>` below it: braces and a
    type to copy along with the id."""
    done = gpubot(*command, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    usage = done.stdout.splitlines()[0]
    assert usage.endswith(f" {' '.join(command)} [OPTIONS] {shown}"), done.stdout
    [argument] = [
        line for line in done.stdout.splitlines() if line.startswith(f"  {shown.strip('[].')}  ")
    ]
    assert "<" not in argument, done.stdout


COMMANDS = [
    [name]
    for name in ("diagnose", "demo", "init", "drill", "timeline", "digest", "serve", "approve")
] + [["deny"], ["rules", "lint"], ["rules", "test"], ["sim", "serve"], ["sim", "inject"]]
COMMANDS += [["sim", "repair"], ["db", "upgrade"], ["alerts", "explain"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_writes_each_option_as_you_would_type_it(command: list[str], tmp_path: Path) -> None:
    """typer wrote `--wait <float range>`, `--as <str>`, `--snapshot <list[Path]>`: a type in
    angle brackets where the value goes. Choices read as click writes them, `[zh|en]`."""
    done = gpubot(*command, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert re.search(r"<[^<>\s]*>", done.stdout) is None, done.stdout


# ---- items 5, 6, 12: an API that is away, the log, the leader gauge --------------------------


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_serve_with_an_unreachable_api_says_so_once_and_keeps_serving(tmp_path: Path) -> None:
    err, out = tmp_path / "serve.err", tmp_path / "serve.out"
    with err.open("wb") as stderr, out.open("wb") as stdout:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "bot.commands", "serve", "--kube-url", "http://127.0.0.1:1",
                "--port", "0", "--store-url", f"sqlite:///{tmp_path / 'gpubot.db'}",
            ],
            stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, cwd=tmp_path,
            env=_env(tmp_path, GPUBOT_SERVE__BEARER_TOKEN=TOKEN),
        )  # fmt: skip
    served = Serve("lone", process, out, err)
    try:
        served.wait_listening(timeout_s=120)
        status, body = _get(f"{served.url}/readyz")
        assert status == 503 and "kubernetes api" in body
        status, _ = _get(f"{served.url}/healthz")
        assert status == 200
        logged = err.read_text().splitlines()
        records = [json.loads(line) for line in logged]  # not a terminal: JSON, one a line
        warnings = [r for r in records if r["level"] == "warning"]
        assert 1 <= len(warnings) <= 2, logged
        assert not any("Retrying" in line for line in logged)
        assert not any(r["logger"].startswith(("alembic", "apscheduler")) for r in records)
    finally:
        served.kill()


def test_the_leader_gauge_and_a_quiet_log(tmp_path: Path) -> None:
    sim_store = cluster()
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    with simulator(sim_store) as server, running_gpubot(tmp_path, server.url, url) as bot:
        leader = bot.start("gpubot-0")

        def gauge() -> str | None:
            _, text = _get(f"{leader.url}/metrics")
            found = [line for line in text.splitlines() if line.startswith("gpubot_leader{")]
            return found[0] if found and found[0].endswith(" 1.0") else None

        assert wait_for("the leader gauge", gauge, 30, bot) == (
            'gpubot_leader{identity="gpubot-0"} 1.0'
        )
        status, _ = post_alert(leader, xid_alert(sim_store, NODE))
        assert status == 200

        def logged() -> list[dict[str, str]]:
            return [json.loads(line) for line in leader.err.read_text().splitlines()]

        def posted() -> bool | None:
            said = [r["event"] for r in logged()]
            return any(f"on {NODE} posted; request " in e for e in said) or None

        # The leader's duties run every 0.5 s here: at info, APScheduler said so each time.
        wait_for("the diagnosis in the log", posted, 30, bot)
        records = logged()
        assert any("gpubot-0 leads" in r["event"] for r in records), records
        assert not any(r["logger"].startswith(("apscheduler", "alembic")) for r in records)


def test_an_approval_serve_does_not_accept_is_not_reported_as_done(tmp_path: Path) -> None:
    """The issue's case: `gpubot approve --config settings.yaml` (alice may approve) while
    serve runs on settings that name nobody. The vote is recorded, but nothing runs: the
    command must say so, exit non-zero, and the node stays schedulable."""
    import yaml

    from bot.store.sql import SqlStore
    from gpusim.resources import BY_KIND
    from tests.helpers.processes import the_request, write_settings

    serve_config = write_settings(tmp_path / "serve.yaml")
    settings = yaml.safe_load(serve_config.read_text())
    nobody = {"users": [], "two_person": False}
    settings["remediation"]["approvals"] = {"cordon": nobody, "drain": nobody, "uncordon": nobody}
    serve_config.write_text(yaml.safe_dump(settings))
    sim_store = cluster()
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    with (
        simulator(sim_store) as server,
        running_gpubot(tmp_path, server.url, url, serve_config) as bot,
    ):
        served = bot.start("gpubot-0")
        status, _ = post_alert(served, xid_alert(sim_store, NODE))
        assert status == 200
        store = SqlStore.open(url)
        try:
            drain = wait_for("the drain request", lambda: the_request(store, NODE), 30, bot)
        finally:
            store.close()
        # Without a settings file nobody may approve: refused, and how to name someone.
        refused = gpubot("approve", drain.id, "--as", "alice", "--store-url", url, cwd=tmp_path)
        assert refused.returncode == 2, (refused.stdout, refused.stderr)
        assert refused.stderr.startswith("refused: "), refused.stderr
        assert "embedded default settings" in refused.stderr
        assert "`gpubot init` writes approvers" in refused.stderr
        mine = write_settings(tmp_path / "mine.yaml")  # alice approves here
        done = gpubot(
            "approve", drain.id, "--as", "alice", "--wait", "8", "--store-url", url,
            "--config", str(mine), cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert done.stdout.startswith("recorded: "), done.stdout
        assert "if its own settings agree" in done.stdout
        assert "do its settings name alice as an approver?" in done.stderr, done.stderr
        assert not sim_store.get(BY_KIND["Node"], "", NODE)["spec"].get("unschedulable")


def test_init_speaks_the_language_asked_and_writes_it(tmp_path: Path) -> None:
    done = gpubot("init", "--lang", "zh", "--config", str(tmp_path / "s.yaml"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].startswith(f"已写入 {tmp_path / 's.yaml'}：审批人 ")
    assert "\nlang: zh\n" in (tmp_path / "s.yaml").read_text()
