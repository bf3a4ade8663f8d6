"""What the channel is told about alerts no incident can hold: alerts that name no node, and
alerts Alertmanager left out of a delivery. One notice per Alertmanager group, not per alert.

Why it exists: Alertmanager sends a group's alerts together (its `groupKey`), and when they name
no node it is usually one cause for all of them (a cluster-wide rule, a relabeling that dropped
the node label). Three hundred such alerts told one by one were three hundred channel
messages, burying every diagnosis. Told per group, they are one message that counts them by
name and shows one example's labels.

What it must never do: post once per alert, post for signals that name a node (the diagnosis
pass tells those), or let outside text grow a notice without bound (names, labels and the
group key are cut; the chat adapter escapes what is left).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from bot.model import Lang, Signal
from bot.ports import Chat

NAMES_SHOWN = 8
"""Alert names counted in one notice; the rest are "and N more names"."""

TEXT_MAX = 120
"""How much of one outside value (a name, a label, the group key) a notice shows."""

LABELS_MAX = 800
"""How much of one example's labels a notice shows."""

_STATUS_ZH = {"firing": "触发中", "resolved": "已恢复"}


def _cut(text: str, limit: int = TEXT_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _group_of(signal: Signal) -> str:
    return signal.group_key or "?"


def _nodeless(signals: Sequence[Signal], group: str, lang: Lang) -> str:
    names = Counter(s.name for s in signals)
    first = signals[0]
    labels = _cut(
        ", ".join(f"{_cut(k)}={_cut(v)}" for k, v in sorted(first.labels.items())), LABELS_MAX
    )
    if len(signals) == 1:
        if lang is Lang.ZH:
            return (
                f"告警 {_cut(first.name)}（{_STATUS_ZH[first.status]}）未指明节点：节点未知，"
                f"不会为它创建事件。它的标签：{labels}"
            )
        return (
            f"alert {_cut(first.name)} ({first.status}) names no node: node unknown, so no "
            f"incident is opened for it. Its labels: {labels}"
        )
    firing = sum(1 for s in signals if s.status == "firing")
    shown = names.most_common(NAMES_SHOWN)
    more = len(names) - len(shown)
    if lang is Lang.ZH:
        counted = "、".join(f"{_cut(name)} ×{n}" for name, n in shown)
        if more:
            counted += f"，另有 {more} 个告警名"
        return (
            f"Alertmanager 分组 {_cut(group)} 中有 {len(signals)} 条告警未指明节点"
            f"（{firing} 条触发中，{len(signals) - firing} 条已恢复）：节点未知，不会为它们"
            f"创建事件。按名称：{counted}。第一条 {_cut(first.name)} 的标签：{labels}"
        )
    counted = ", ".join(f"{_cut(name)} ×{n}" for name, n in shown)
    if more:
        counted += f", and {more} more name{'s' if more > 1 else ''}"
    return (
        f"{len(signals)} alerts of Alertmanager group {_cut(group)} name no node "
        f"({firing} firing, {len(signals) - firing} resolved): node unknown, so no incident "
        f"is opened for them. By name: {counted}. Labels of the first, {_cut(first.name)}: "
        f"{labels}"
    )


def _truncated(count: int, group: str, lang: Lang) -> str:
    if lang is Lang.ZH:
        return (
            f"Alertmanager 截断了分组 {_cut(group)} 的 {count} 条告警："
            "请调大 max_alerts，或到 Alertmanager 中查看"
        )
    return (
        f"Alertmanager truncated {count} alert(s) of group {_cut(group)}: raise max_alerts "
        "or look in Alertmanager"
    )


def notices(batch: Sequence[Signal], lang: Lang = Lang.EN) -> list[str]:
    """The notices a batch of signals gives: per Alertmanager group, at most one about its
    alerts that name no node and one about alerts Alertmanager left out."""
    nodeless: dict[str, list[Signal]] = {}
    truncated: dict[str, int] = {}
    for signal in batch:
        group = _group_of(signal)
        if signal.node is None and signal.source == "alertmanager":
            nodeless.setdefault(group, []).append(signal)
        if signal.truncated_alerts:
            # Every alert of a delivery carries its count: the group's, not a sum.
            truncated[group] = max(truncated.get(group, 0), signal.truncated_alerts)
    told = [_nodeless(signals, group, lang) for group, signals in nodeless.items()]
    told += [_truncated(count, group, lang) for group, count in truncated.items()]
    return told


def tell_notices(chat: Chat, batch: Sequence[Signal], lang: Lang = Lang.EN) -> None:
    """Post the batch's notices (`notices`) to the chat."""
    for text in notices(batch, lang):
        chat.post_notice(text)
