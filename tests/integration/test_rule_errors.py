"""Issue 15 item 2 in the running bot: thousands of firing alerts on one node, and a rule that
cannot be evaluated there, do not keep another node's Xid 79 from its incident; the failing
rule is one log line and counts each node it fails on once on /metrics, not once per pass."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.config import ApprovalPolicy, Remediation, Settings
from bot.model import Signal
from bot.process.telemetry import Telemetry
from bot.rules.loading import load_rules
from bot.store.sql import SqlStore
from tests.helpers.clocks import FakeClock
from tests.helpers.paths import RULES
from tests.helpers.rigs import build_service, console_chat
from tests.integration.test_service import ONE_PERSON, Bot
from tests.unit.test_bounded_evaluation import BUDGET_BREAKER


@pytest.fixture
def bot(sim_cluster: Any, tmp_path: Path) -> Iterator[Bot]:
    server, cluster = sim_cluster
    settings = Settings(
        remediation=Remediation(
            approvals=ApprovalPolicy(cordon=ONE_PERSON, drain=ONE_PERSON, uncordon=ONE_PERSON)
        )
    )
    (tmp_path / "breaker.yaml").write_text(BUDGET_BREAKER)
    rules = load_rules([RULES, tmp_path / "breaker.yaml"])
    assert not rules.errors
    store = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
    chat, out = console_chat(settings.lang)
    clock = FakeClock(real_time=True)
    service = build_service(
        cluster, store, settings, clock=clock, chat=chat, rules=rules, telemetry=Telemetry()
    )
    yield Bot(server, store, service, out, [True], clock)
    store.close()


def _hot(node: str, count: int) -> list[Signal]:
    """`count` GPUTemperatureHigh alerts on one GPU of `node`, each its own alert (labels)."""
    now = datetime.now(UTC)
    return [
        Signal(
            source="alertmanager",
            name="GPUTemperatureHigh",
            node=node,
            gpu="0" if i < count - 30 else str(i),
            labels={"alertname": "GPUTemperatureHigh", "node": node, "sensor": str(i)},
            starts_at=now,
            fingerprint=f"hot-{node}-{i}",
        )
        for i in range(count)
    ]


def test_thousands_of_alerts_and_a_failing_rule_on_one_node_leave_the_others_diagnosed(
    bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    hot = _hot("gpu-a1", 3000) + _hot("gpu-a3", 40)
    assert all(bot.store.add_signals(hot, datetime.now(UTC)))
    xid = bot.alert("xid", "gpu-a2", code=79, gpu=3)
    with caplog.at_level(logging.WARNING, logger="gpubot.passes"):
        opened = bot.service.process([*hot[:1], *xid])
        bot.service.process(xid)  # a second pass: the same failure is not told again
    assert ("gpu-a2", "gpu-fell-off-bus") in {(i.node, i.rule) for i in opened}
    assert ("gpu-a1", "gpu-thermal-power") in {(i.node, i.rule) for i in opened}
    assert "GPU fell off the bus" in bot.said
    # One line for the rule, however many nodes it fails on; each node counted once.
    told = [r.getMessage() for r in caplog.records if "budget-breaker" in r.getMessage()]
    assert len(told) == 1 and "gpu-a1" in told[0] and "1 more subject" in told[0], told
    assert bot.metric("gpubot_rule_errors_total", rule="budget-breaker") == 2
