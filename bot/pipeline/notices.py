"""What the channel is told about alerts no incident can hold: alerts that name no node, alerts
that name a node the cluster does not have, and alerts Alertmanager left out of a delivery.
One notice per Alertmanager group, not per alert.

Why it exists: Alertmanager sends a group's alerts together (its `groupKey`), and when they name
no node it is usually one cause for all of them (a cluster-wide rule, a relabeling that dropped
the node label). Three hundred such alerts told one by one were three hundred channel
messages, burying every diagnosis. Told per group, they are one message that counts them by
name and shows one example's labels.

A node the cluster does not have is told here and nowhere else: `gpu-a1` with a zero-width
space renders as `gpu-a1`, and as an incident of its own it paged for a node that is not
there. Its name is shown escaped (`bot.outside_text.shown_name`) and marked absent.

What it must never do: post once per alert, post for signals that name a node of the cluster
(the diagnosis pass tells those), show a node's name from outside unescaped, or let outside
text grow a notice without bound (names, labels and the group key are cut; the chat adapter
escapes what is left).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from bot.facts.nodes import absent_line
from bot.model import Lang, Signal
from bot.ports import Chat
from bot.texts import say

NAMES_SHOWN = 8
"""Alert names counted in one notice; the rest are "and N more names"."""

NODES_SHOWN = 8
"""Nodes the cluster does not have listed in one notice; the rest are "and N more nodes"."""

TEXT_MAX = 120
"""How much of one outside value (a name, a label, the group key) a notice shows."""

LABELS_MAX = 800
"""How much of one example's labels a notice shows."""


def _cut(text: str, limit: int = TEXT_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _group_of(signal: Signal) -> str:
    return signal.group_key or "?"


def _by_name(signals: Sequence[Signal], lang: Lang) -> str:
    """`GPUXidError ×3, DCGMExporterDown ×1`: the alerts counted by name, the most first."""
    names = Counter(s.name for s in signals)
    shown = names.most_common(NAMES_SHOWN)
    more = len(names) - len(shown)
    counted = say(lang, "list.enumeration").join(f"{_cut(name)} ×{n}" for name, n in shown)
    if more:
        counted += say(lang, "notice.more_names" if more > 1 else "notice.more_name", more=more)
    return counted


def _nodeless(signals: Sequence[Signal], group: str, lang: Lang) -> str:
    first = signals[0]
    labels = _cut(
        ", ".join(f"{_cut(k)}={_cut(v)}" for k, v in sorted(first.labels.items())), LABELS_MAX
    )
    if len(signals) == 1:
        status = say(lang, "notice.firing" if first.status == "firing" else "notice.resolved")
        return say(lang, "notice.nodeless", name=_cut(first.name), status=status, labels=labels)
    firing = sum(1 for s in signals if s.status == "firing")
    counted = _by_name(signals, lang)
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


def _absent(signals: Sequence[Signal], group: str, lang: Lang) -> str:
    """One group's firing alerts naming nodes the cluster does not have: counted by name, then
    each node, escaped, said to be absent, and marked when no node could have its name."""
    nodes = sorted({s.node or "" for s in signals})
    lines = [
        say(
            lang,
            "notice.absent",
            count=len(signals),
            group=_cut(group),
            counted=_by_name(signals, lang),
        )
    ]
    lines += [f"• {absent_line(node, lang, TEXT_MAX)}" for node in nodes[:NODES_SHOWN]]
    if len(nodes) > NODES_SHOWN:
        lines.append(say(lang, "notice.more_nodes", more=len(nodes) - NODES_SHOWN))
    return "\n".join(lines)


def absent_notices(signals: Sequence[Signal], lang: Lang = Lang.EN) -> list[str]:
    """Per Alertmanager group, one notice about its firing alerts that name a node the
    cluster does not have (`signals`: those, as the pass found them; `Read.absent`)."""
    by_group: dict[str, list[Signal]] = {}
    for signal in signals:
        if signal.node and signal.status == "firing" and signal.source == "alertmanager":
            by_group.setdefault(_group_of(signal), []).append(signal)
    return [_absent(found, group, lang) for group, found in by_group.items()]


def tell_absent(chat: Chat, signals: Sequence[Signal], lang: Lang = Lang.EN) -> None:
    """Post the notices about alerts naming nodes the cluster does not have
    (`absent_notices`) to the chat."""
    for text in absent_notices(signals, lang):
        chat.post_notice(text)


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
