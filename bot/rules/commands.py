"""Runbook commands made concrete for one node, safe to paste into a shell.

A rule's commands name what they act on by placeholder: `<node>`, `<ns:COMPONENT>` (the
namespace the component's pod runs in on that node) and `<pod:COMPONENT>` (that pod). A value
replaces its placeholder only when it comes from the cluster and is a valid Kubernetes name,
and it goes in shell-quoted: a node an alert names but the cluster does not have keeps the
placeholder (a person must look), so no text from an alert label reaches a command.

What it must never do: put a value it did not validate into a command, or guess a namespace
when one is known from the pod itself.
"""

from __future__ import annotations

import re
import shlex

from bot.model import NodeFacts
from bot.outside_text import kubernetes_name

_PLACEHOLDER = re.compile(r"<(node|ns|pod)(?::([a-z0-9-]+))?>")


def fill(command: str, node: NodeFacts | None, default_namespace: str) -> str:
    """`command` with each placeholder that the node's facts can fill filled, quoted."""

    def value(match: re.Match[str]) -> str:
        kind, component = match.group(1), match.group(2)
        if node is None or not node.known:
            return match.group(0)
        if kind == "node":
            found: str | None = node.name
            label = False
        else:
            facts = node.components.get(component or "")
            if kind == "ns":
                found = (facts.namespace if facts else None) or default_namespace
                label = True
            else:
                found = facts.pod if facts else None
                label = False
        if found is None or not kubernetes_name(found, label=label):
            return match.group(0)
        return shlex.quote(found)

    return _PLACEHOLDER.sub(value, command)
