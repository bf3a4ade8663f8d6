"""The notices about alerts no incident holds: one per Alertmanager group and kind, whatever
the number of alerts, in English and Chinese, with outside text cut to size."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from bot.model import Lang, Signal
from bot.pipeline.notices import notices
from bot.roots.serve import quarantine_notice
from tests.helpers.builders import T0


def nodeless(
    i: int,
    name: str = "DCGMExporterDown",
    group: str | None = "{}:{job=dcgm}",
    truncated: int = 0,
    status: str = "firing",
) -> Signal:
    return Signal(
        source="alertmanager",
        name=name,
        status=status,  # type: ignore[arg-type]
        labels={"alertname": name, "shard": str(i)},
        starts_at=T0,
        fingerprint=f"f{i}",
        group_key=group,
        truncated_alerts=truncated,
    )


def test_three_hundred_alerts_of_one_group_naming_no_node_are_one_notice() -> None:
    batch = [nodeless(i, "GPUXidError" if i % 3 == 0 else "DCGMExporterDown") for i in range(300)]
    [told] = notices(batch)
    assert told.startswith("300 alerts of Alertmanager group {}:{job=dcgm} name no node")
    assert "(300 firing, 0 resolved)" in told
    assert "By name: DCGMExporterDown ×200, GPUXidError ×100." in told
    assert "Labels of the first, GPUXidError: alertname=GPUXidError, shard=0" in told


def test_each_group_gets_its_own_notice_and_alerts_with_a_node_get_none() -> None:
    placed = nodeless(0).model_copy(update={"node": "gpu-a1"})
    watched = Signal(source="kube", name="NodeNotReady", fingerprint="k1")
    batch = [
        nodeless(1, group="a"),
        nodeless(2, group="b"),
        nodeless(3, group="b"),
        placed,
        watched,
    ]
    told = notices(batch)
    assert len(told) == 2
    assert told[0].startswith("alert DCGMExporterDown (firing) names no node: node unknown")
    assert told[1].startswith("2 alerts of Alertmanager group b name no node")
    assert notices([placed, watched]) == []


def test_a_truncated_delivery_is_one_notice_with_the_groups_count() -> None:
    batch = [nodeless(i, truncated=7).model_copy(update={"node": "gpu-a1"}) for i in range(50)]
    assert notices(batch) == [
        "Alertmanager truncated 7 alert(s) of group {}:{job=dcgm}: raise max_alerts or look "
        "in Alertmanager"
    ]


def test_notices_speak_chinese_too() -> None:
    [one] = notices([nodeless(0, status="resolved")], Lang.ZH)
    assert one.startswith("告警 DCGMExporterDown（已恢复）未指明节点：节点未知")
    batch = [nodeless(i, name=f"Alert{i}") for i in range(10)]
    [many, cut] = notices([*batch, nodeless(10, truncated=3)], Lang.ZH)
    assert many.startswith("Alertmanager 分组 {}:{job=dcgm} 中有 11 条告警未指明节点")
    assert "另有 3 个告警名" in many
    assert cut.startswith("Alertmanager 截断了分组 {}:{job=dcgm} 的 3 条告警")


def test_outside_text_cannot_make_a_notice_long() -> None:
    huge = "x" * 100_000
    batch = [
        nodeless(i, name=huge + str(i), group=huge).model_copy(
            update={"labels": {f"{huge}{k}": huge for k in range(50)}}
        )
        for i in range(100)
    ]
    [told] = notices(batch)
    assert len(told) < 4000
    assert "and 92 more names" in told


def test_a_delivery_set_aside_is_told_in_the_language_of_the_settings() -> None:
    """The quarantine notice was English under zh."""
    said: list[str] = []
    chat = SimpleNamespace(post_notice=lambda text, monospace=False: said.append(text))
    quarantine_notice(cast(Any, chat), Lang.ZH)(7, "alerts: not a list")
    quarantine_notice(cast(Any, chat), Lang.EN)(7, "alerts: not a list")
    assert said == [
        "webhook 投递 7 无法拆分成告警，已搁置（保存在存储中，未诊断；之后的投递照常处理）："
        "alerts: not a list",
        "webhook delivery 7 could not be split into alerts and was set aside (kept in the store, "
        "not diagnosed; the deliveries after it go on): alerts: not a list",
    ]
