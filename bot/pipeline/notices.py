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
from bot.texts import say

NAMES_SHOWN = 8
"""Alert names counted in one notice; the rest are "and N more names"."""

TEXT_MAX = 120
"""How much of one outside value (a name, a label, the group key) a notice shows."""

LABELS_MAX = 800
"""How much of one example's labels a notice shows."""


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
        status = say(lang, "notice.firing" if first.status == "firing" else "notice.resolved")
        return say(lang, "notice.nodeless", name=_cut(first.name), status=status, labels=labels)
    firing = sum(1 for s in signals if s.status == "firing")
    shown = names.most_common(NAMES_SHOWN)
    more = len(names) - len(shown)
    counted = say(lang, "list.enumeration").join(f"{_cut(name)} ×{n}" for name, n in shown)
    if more:
        counted += say(lang, "notice.more_names" if more > 1 else "notice.more_name", more=more)
    return say(
        lang,
        "notice.nodeless_many",
        count=len(signals),
        group=_cut(group),
        firing=firing,
        resolved=len(signals) - firing,
        counted=counted,
        first=_cut(first.name),
        labels=labels,
    )


def _truncated(count: int, group: str, lang: Lang) -> str:
    return say(lang, "notice.truncated", count=count, group=_cut(group))


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
