"""The CLI as a person runs it: real processes, real files, exit codes and output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.paths import HEALTHY, RULES

NOW = "2026-12-02T03:00:00Z"


def gpubot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.commands", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def _zero_capacity_snapshot(tmp_path: Path) -> Path:
    data = json.loads(HEALTHY.read_text())
    for item in data["items"]:
        if item["kind"] == "Node" and item["metadata"]["name"] == "gpu-a3":
            item["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(data))
    return path


def test_healthy_snapshot_gives_no_diagnosis() -> None:
    done = gpubot("diagnose", "--snapshot", str(HEALTHY), "--now", NOW, "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"diagnoses": []}


def test_json_output_has_the_documented_shape(tmp_path: Path) -> None:
    done = gpubot(
        "diagnose",
        "--snapshot",
        str(_zero_capacity_snapshot(tmp_path)),
        "--now",
        NOW,
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    [diagnosis] = [d for d in json.loads(done.stdout)["diagnoses"] if d["node"] == "gpu-a3"]
    assert diagnosis["rule"] == "gpu-capacity-zero"
    assert {
        "rule",
        "node",
        "pool",
        "stage",
        "severity",
        "title",
        "questions",
        "evidence",
        "blockers",
        "runbook",
        "proposals",
    } <= set(diagnosis)
    assert set(diagnosis["questions"]) == {"registered", "gpu_visible", "workloads", "scope"}
    assert diagnosis["pool"] == "a100-east" and diagnosis["stage"] == "steady"
    assert diagnosis["proposals"] == [
        {"action": "cordon", "requires_approval": True, "force": False}
    ]
    assert "0 of 8" in diagnosis["questions"]["gpu_visible"]
    assert any(
        "kubectl describe node gpu-a3" in c for s in diagnosis["runbook"] for c in s["commands"]
    )


def test_chinese_and_markdown_output(tmp_path: Path) -> None:
    snapshot = str(_zero_capacity_snapshot(tmp_path))
    zh = gpubot(
        "diagnose", "--snapshot", snapshot, "--now", NOW, "--lang", "zh", "--format", "markdown"
    )
    assert zh.returncode == 0, zh.stderr
    assert "节点 Ready，但 nvidia.com/gpu 容量为零" in zh.stdout
    assert "**GPU 被调度器看见了吗？**" in zh.stdout
    text = gpubot("diagnose", "--snapshot", snapshot, "--now", NOW)
    assert "gpu-a3" in text.stdout and "CRITICAL" in text.stdout


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{not json", ":1: not valid JSON"),
        ('{"kind": "List"}', "expected a Kubernetes List"),
    ],
)
def test_malformed_snapshot_exits_2_with_one_line_and_no_traceback(
    tmp_path: Path, content: str, fragment: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    done = gpubot("diagnose", "--snapshot", str(path))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {path}") and fragment in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_missing_file_exits_2(tmp_path: Path) -> None:
    done = gpubot("diagnose", "--snapshot", str(tmp_path / "nope.json"))
    assert done.returncode == 2 and "No such file" in done.stderr and "Traceback" not in done.stderr


def test_malformed_alerts_exit_2_naming_the_field(tmp_path: Path) -> None:
    alerts = tmp_path / "alerts.json"
    alerts.write_text(json.dumps({"status": "firing", "alerts": [{"status": "firing"}]}))
    done = gpubot("diagnose", "--snapshot", str(HEALTHY), "--alerts", str(alerts))
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {alerts}: field alerts.0.labels: Field required"


def test_broken_rule_exits_2_but_the_other_rules_still_diagnose(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    good = yaml.safe_load((RULES / "gpu-stack.yaml").read_text())
    (rules / "good.yaml").write_text(yaml.safe_dump(good, allow_unicode=True))
    (rules / "bad.yaml").write_text("rules:\n  - id: bad-rule\n    when: 'node.ready =='\n")
    done = gpubot(
        "diagnose",
        "--snapshot",
        str(_zero_capacity_snapshot(tmp_path)),
        "--now",
        NOW,
        "--rules",
        str(rules),
        "--format",
        "json",
    )
    assert done.returncode == 2
    assert [d["rule"] for d in json.loads(done.stdout)["diagnoses"]] == ["gpu-capacity-zero"]
    assert f"error: {rules / 'bad.yaml'}:2: rule bad-rule:" in done.stderr
    assert "Traceback" not in done.stderr


def _capacity_rule_broken(tmp_path: Path, part: str, index: int | None = None) -> Path:
    """The shipped gpu-stack.yaml, one CEL expression of gpu-capacity-zero (its `when`, or
    one item of `part`) no longer CEL."""
    rules = tmp_path / "rules"
    rules.mkdir()
    stack = yaml.safe_load((RULES / "gpu-stack.yaml").read_text())
    [rule] = [r for r in stack["rules"] if r["id"] == "gpu-capacity-zero"]
    if index is None:
        rule[part] = "node.gpu.allocatable =="
    else:
        rule[part][index] = '"allocatable " +'
    (rules / "gpu-stack.yaml").write_text(yaml.safe_dump(stack, allow_unicode=True))
    return rules


def _diagnose_json(snapshot: Path, rules: Path) -> subprocess.CompletedProcess[str]:
    return gpubot(
        "diagnose",
        "--snapshot",
        str(snapshot),
        "--now",
        NOW,
        "--rules",
        str(rules),
        "--format",
        "json",
    )


def test_a_broken_condition_is_one_error_naming_its_line_and_the_rule_gives_nothing(
    tmp_path: Path,
) -> None:
    rules = _capacity_rule_broken(tmp_path, "when")
    done = _diagnose_json(_zero_capacity_snapshot(tmp_path), rules)
    assert done.returncode == 2
    assert json.loads(done.stdout) == {"diagnoses": []}
    [line] = done.stderr.splitlines()  # once, not once per node
    assert line.startswith(f"error: {rules / 'gpu-stack.yaml'}:")
    assert ": rule gpu-capacity-zero: when: CEL at 1:" in line


def test_a_broken_evidence_line_of_a_rule_that_fires_is_one_error_and_no_diagnosis(
    tmp_path: Path,
) -> None:
    rules = _capacity_rule_broken(tmp_path, "evidence", 2)
    done = _diagnose_json(_zero_capacity_snapshot(tmp_path), rules)
    assert done.returncode == 2
    assert json.loads(done.stdout) == {"diagnoses": []}
    [line] = done.stderr.splitlines()
    assert ": rule gpu-capacity-zero: evidence.2: CEL at 1:" in line


def test_diagnose_compiles_only_the_cel_it_evaluates_and_lint_reports_the_rest(
    tmp_path: Path,
) -> None:
    # On a healthy cluster gpu-capacity-zero never fires, so its evidence is never evaluated:
    # `diagnose` does not compile it (that is most of the rules' CEL, and of a small
    # diagnosis's time); `rules lint` compiles every expression and names the broken one.
    rules = _capacity_rule_broken(tmp_path, "evidence", 2)
    done = _diagnose_json(HEALTHY, rules)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"diagnoses": []} and done.stderr == ""
    lint = gpubot("rules", "lint", str(rules))
    assert lint.returncode == 2
    assert ": rule gpu-capacity-zero: evidence.2: CEL at 1:" in lint.stderr


def test_help_lists_every_command_with_its_help() -> None:
    done = gpubot("--help")
    assert done.returncode == 0, done.stderr
    for command, words in [
        ("diagnose", "Diagnose a cluster snapshot"),
        ("rules", "Check and test rule files"),
        ("demo", "A live simulated GPU cluster"),
        ("init", "Write a commented settings file"),
        ("drill", "Rehearse scenarios"),
        ("timeline", "An incident's timeline"),
        ("digest", "The digest serve posts daily"),
        ("serve", "Run the bot"),
        ("approve", "Record an approval"),
        ("deny", "Record a denial"),
        ("db", "The store's schema"),
        ("sim", "A simulated GPU cluster"),
        ("alerts", "How gpubot reads Alertmanager alerts"),
    ]:
        assert any(
            line.split()[:1] == [command] and words in line for line in done.stdout.splitlines()
        ), (command, done.stdout)


# What `gpubot diagnose --format json` must not load: each is used only by other commands or
# other output formats, and together they were about a third of a small diagnosis's time.
NOT_FOR_DIAGNOSE = (
    "rich",
    "structlog",
    "sqlalchemy",
    "kubernetes",
    "apscheduler",
    "prometheus_client",
    "prometheus_api_client",
    "starlette",
    "slack_sdk",
    "gpusim",
    "bot.chat.console",
    "bot.facts.mustgather",
    "bot.rules.testing",
    "bot.rules.linting",
)


def test_diagnose_as_json_loads_only_what_it_uses(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from bot.commands import app\n"
        "try:\n"
        "    app()\n"
        "finally:\n"
        "    sys.stderr.write(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "diagnose",
            "--snapshot",
            str(_zero_capacity_snapshot(tmp_path)),
            "--now",
            NOW,
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["diagnoses"], "it did diagnose"
    loaded = set(done.stderr.split())
    assert "typer" in loaded and "bot.diagnose" in loaded, "the list is of this run"
    found = sorted(
        m for m in loaded if m.split(".")[0] in NOT_FOR_DIAGNOSE or m in NOT_FOR_DIAGNOSE
    )
    assert found == []


def test_rules_lint_and_test_pass_on_the_shipped_rules() -> None:
    lint = gpubot("rules", "lint")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert lint.stdout.strip().endswith("OK")
    tests = gpubot("rules", "test")
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert tests.stdout.strip().splitlines()[-1].endswith(" 0 failed")


def test_rules_test_reports_a_failing_expectation_with_its_line(tmp_path: Path) -> None:
    tests_dir = tmp_path / "tests"
    tests_dir.mkdir()
    (tests_dir / "snapshots").mkdir()
    (tests_dir / "snapshots" / "healthy.json").write_text(HEALTHY.read_text())
    (tmp_path / "gpu-stack.yaml").write_text((RULES / "gpu-stack.yaml").read_text())
    (tests_dir / "t.yaml").write_text(
        "tests:\n"
        "  - name: wrongly expects a diagnosis\n"
        f"    now: '{NOW}'\n"
        "    snapshot: snapshots/healthy.json\n"
        "    expect:\n"
        "      - {rule: gpu-capacity-zero, node: gpu-a1}\n"
    )
    done = gpubot("rules", "test", str(tmp_path))
    assert done.returncode == 1
    assert (
        f"FAIL {tests_dir / 't.yaml'}:2: wrongly expects a diagnosis: "
        "expected gpu-capacity-zero on gpu-a1, it did not fire" in done.stdout
    )
    assert done.stdout.strip().splitlines()[-1] == "0 passed, 1 failed"


def test_demo_runs_the_whole_loop_unattended_and_keeps_the_timeline(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    done = gpubot("demo", "--pause", "0.5", "--approve-as", "alice", "--store-url", url)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    seen = "kube: GPUAllocatableChanged gpu-a2 resource=nvidia.com/gpu, from=8, to=7"
    assert seen in text  # by the watches
    for title in ("GPU fell off the bus", "Device plugin crash-looping", "capacity is zero"):
        assert title in text
    assert "approved by alice (--approve-as)" in text
    assert "drained gpu-a2: evicted 2 pods" in text
    assert "health gate passed for gpu-a2" in text
    assert "uncordoned gpu-a2" in text
    assert "incident 1 resolved" in text and "Time to recover" in text

    shown = gpubot("timeline", "gpu-a2", "--store-url", url, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    [loop] = [
        json.loads(line)
        for line in shown.stdout.splitlines()
        if json.loads(line)["incident"]["rule"] == "gpu-fell-off-bus"
    ]
    assert loop["incident"]["state"] == "resolved"
    kinds = [e["kind"] for e in loop["timeline"]]
    assert kinds.count("approval") == 2 and kinds.count("action-result") == 2
    assert kinds[-1] == "resolve"
    assert {e["actor"] for e in loop["timeline"] if e["kind"] == "approval"} == {"alice"}

    # Issue 19 item 11: the table names every column, the details too.
    table = gpubot("timeline", "1", "--store-url", url)
    [header] = [line for line in table.stdout.splitlines() if "when (UTC)" in line]
    assert [cell.strip() for cell in header.strip("┃ ").split("┃")] == [
        "when (UTC)",
        "who",
        "what",
        "details",
    ], table.stdout

    markdown = gpubot("timeline", "1", "--store-url", url, "--format", "markdown")
    assert "| alice | approval | alice approved kubectl drain gpu-a2" in markdown.stdout

    # Issue 19 item 7: the timeline's own words follow --lang (its entries were written in the
    # language the bot ran in).
    zh = gpubot("timeline", "1", "--store-url", url, "--lang", "zh")
    assert zh.returncode == 0, zh.stderr
    assert "事件 1" in zh.stdout and "内容" in zh.stdout
    assert "incident 1" not in zh.stdout and "details" not in zh.stdout
    zh_markdown = gpubot(
        "timeline", "1", "--store-url", url, "--lang", "zh", "--format", "markdown"
    )
    assert (
        zh_markdown.stdout.startswith("## 事件 1")
        and "已解决" in zh_markdown.stdout.splitlines()[0]
    )


def test_the_digest_of_a_demo_run_counts_its_incidents(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    assert (
        gpubot("demo", "--pause", "0.3", "--approve-as", "alice", "--store-url", url).returncode
        == 0
    )
    done = gpubot("digest", "--store-url", url, "--tz", "Asia/Shanghai", "--lang", "zh")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("过去 24 小时：新开 "), done.stdout
    assert "gpu-fell-off-bus" in done.stdout and "█" in done.stdout
    bad = gpubot("digest", "--store-url", url, "--tz", "Mars/Base")
    assert bad.returncode == 2 and "unknown time zone 'Mars/Base'" in bad.stderr


def test_timeline_of_an_unknown_node_is_a_clear_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert gpubot("db", "upgrade", "--store-url", url).returncode == 0  # a store, empty
    done = gpubot("timeline", "gpu-zz", "--store-url", url)
    assert done.returncode == 2
    assert "no incident with id or node 'gpu-zz'" in done.stderr


def test_demo_without_a_person_stops_at_the_first_approval() -> None:
    done = gpubot("demo", "--pause", "0.3")
    assert done.returncode == 0, done.stderr
    assert "Run `gpubot demo --approve-as NAME` to approve as NAME" in done.stdout
    assert "drained" not in done.stdout


def test_demo_replays_scenarios() -> None:
    done = gpubot("demo", "--replay")
    assert done.returncode == 0, done.stderr
    assert "Node Ready but nvidia.com/gpu capacity is zero" in done.stdout


def _write_json(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda node: node["status"].update(conditions="x"), "Node gpu-a1: it or one of its"),
        (lambda node: node["spec"].update(taints=[1], unschedulable=True), "unexpected shape"),
    ],
)
def test_valid_json_of_the_wrong_shape_exits_2_naming_the_node(
    tmp_path: Path, mutate: Any, fragment: str
) -> None:
    data = json.loads(HEALTHY.read_text())
    mutate(next(i for i in data["items"] if i["metadata"]["name"] == "gpu-a1"))
    done = gpubot("diagnose", "--snapshot", str(_write_json(tmp_path, "s.json", data)))
    assert done.returncode == 2 and fragment in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("alert", "fragment"),
    [
        ({"endsAt": "garbage"}, "field alerts.0.endsAt"),
        ({"labels": {"alertname": "x", "n": 3}}, "field alerts.0.labels.n"),
    ],
)
def test_bad_alert_fields_exit_2(tmp_path: Path, alert: dict[str, object], fragment: str) -> None:
    payload = {
        "status": "firing",
        "alerts": [{"status": "firing", "labels": {"alertname": "x"}, **alert}],
    }
    path = _write_json(tmp_path, "a.json", payload)
    done = gpubot("diagnose", "--snapshot", str(HEALTHY), "--alerts", str(path))
    assert done.returncode == 2 and fragment in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such settings file"),
        ("- a\n", "expected a mapping of settings"),
        ("thresholds:\n  drain_stuck_after_s: soon\n", "thresholds.drain_stuck_after_s:"),
        ("langauge: zh\n", "langauge: Extra inputs are not permitted"),
    ],
)
def test_bad_settings_file_exits_2(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "gpubot.yaml"
    if content is not None:
        path.write_text(content)
    done = gpubot("diagnose", "--snapshot", str(HEALTHY), "--config", str(path))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {path}: ") and message in done.stderr


def test_square_brackets_from_the_cluster_are_shown_not_parsed_as_markup(tmp_path: Path) -> None:
    data = json.loads(HEALTHY.read_text())
    node = next(i for i in data["items"] if i["metadata"]["name"] == "gpu-a1")
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    ready.update(
        status="False", reason="KubeletNotReady", message="PLEG is not healthy [/x] [bold red]"
    )
    done = gpubot(
        "diagnose", "--snapshot", str(_write_json(tmp_path, "s.json", data)), "--now", NOW
    )
    assert done.returncode == 0, done.stderr
    assert "[bold red]" in done.stdout.replace("\n", "")


def _rule_test_dir(tmp_path: Path, test_yaml: str) -> Path:
    tests_dir = tmp_path / "tests"
    (tests_dir / "snapshots").mkdir(parents=True)
    (tests_dir / "snapshots" / "healthy.json").write_text(HEALTHY.read_text())
    (tmp_path / "gpu-stack.yaml").write_text((RULES / "gpu-stack.yaml").read_text())
    (tests_dir / "t.yaml").write_text(test_yaml)
    return tests_dir / "t.yaml"


@pytest.mark.parametrize(
    ("edit", "now", "message"),
    [
        (
            "{kind: Node, name: nope, merge: {spec: {}}}",
            NOW,
            "t.yaml:2: broken: edits: no Node nope",
        ),
        ("{kind: Node, name: gpu-a1}", NOW, "give exactly one of merge, delete, add"),
        ("{merge: {spec: {}}}", NOW, "merge and delete need kind and name"),
        (
            "{kind: Node, name: gpu-a1, delete: true}",
            "2026-12-02T03:00:00",
            "now: Input should have timezone",
        ),
    ],
)
def test_bad_rule_test_input_exits_2_naming_the_test(
    tmp_path: Path, edit: str, now: str, message: str
) -> None:
    path = _rule_test_dir(
        tmp_path,
        f"tests:\n  - name: broken\n    now: '{now}'\n    snapshot: snapshots/healthy.json\n"
        f"    edits:\n      - {edit}\n    expect: []\n",
    )
    done = gpubot("rules", "test", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def test_db_upgrade_brings_an_older_store_to_this_schema(tmp_path: Path) -> None:
    import sqlalchemy as sa

    from bot.store import migrating

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    migrating.upgrade(engine, "0001")
    engine.dispose()
    refused = gpubot("timeline", "gpu-a1", "--store-url", url)
    assert refused.returncode == 2
    assert f"run `gpubot db upgrade --store-url {url}`" in refused.stderr
    done = gpubot("db", "upgrade", "--store-url", url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"schema 0001 -> {migrating.head()}"
    assert (
        "no incident with id or node 'gpu-a1'"
        in gpubot("timeline", "gpu-a1", "--store-url", url).stderr
    )


def test_version_is_the_installed_distributions() -> None:
    from importlib.metadata import version

    done = gpubot("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"gpubot {version('gpubot')}"
