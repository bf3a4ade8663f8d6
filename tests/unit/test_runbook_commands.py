"""Invariant 10 for runbook commands: nothing from outside reaches a command line unquoted.
A node, pod or namespace name goes into a command only when it is a name the API server would
accept, and shell-quoted; anything else (an alert's label, a hostile or broken name) leaves the
placeholder for a person to fill."""

from __future__ import annotations

import shlex
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.config import Settings
from bot.facts.collecting import collect_facts
from bot.facts.snapshots import load_snapshot
from bot.model import NodeFacts
from bot.rules.commands import fill
from tests.helpers.paths import HEALTHY

COMMAND = (
    "kubectl -n <ns:nvidia-device-plugin-daemonset> logs <pod:nvidia-device-plugin-daemonset>"
    " && kubectl describe node <node>"
)
_FACTS = collect_facts(load_snapshot(HEALTHY), [], Settings(), datetime.now(UTC))
BASE = _FACTS.nodes["gpu-a1"]


def node_named(name: str, pod: str, namespace: str) -> NodeFacts:
    plugin = BASE.components["nvidia-device-plugin-daemonset"].model_copy(
        update={"pod": pod, "namespace": namespace}
    )
    components = {**BASE.components, "nvidia-device-plugin-daemonset": plugin}
    return BASE.model_copy(update={"name": name, "components": components})


def test_real_names_fill_their_placeholders() -> None:
    filled = fill(COMMAND, node_named("gpu-a1", "nvidia-device-plugin-x1", "gpu-operator"), "x")
    assert filled == (
        "kubectl -n gpu-operator logs nvidia-device-plugin-x1 && kubectl describe node gpu-a1"
    )


def test_a_hostile_name_keeps_the_placeholder() -> None:
    hostile = node_named("gpu-a1; rm -rf /", "$(reboot)", "ns`id`")
    assert fill(COMMAND, hostile, "gpu-operator") == COMMAND


@settings(max_examples=300, deadline=None)
@given(name=st.text(max_size=80), pod=st.text(max_size=80), namespace=st.text(max_size=80))
def test_whatever_the_names_the_shell_sees_each_as_one_word_or_the_placeholder(
    name: str, pod: str, namespace: str
) -> None:
    filled = fill(COMMAND, node_named(name, pod, namespace), "gpu-operator")
    words = shlex.split(filled)
    assert words[:2] == ["kubectl", "-n"] and words[3] == "logs" and words[5] == "&&"
    # No namespace known from the pod: the default one (gpu-operator here).
    assert words[2] in (namespace, "gpu-operator", "<ns:nvidia-device-plugin-daemonset>")
    assert words[4] in (pod, "<pod:nvidia-device-plugin-daemonset>")
    assert words[6:] == ["kubectl", "describe", "node", words[9]] and len(words) == 10
    assert words[9] in (name, "<node>")
    for word in (words[2], words[4], words[9]):
        assert not set(word) & set(";|&$`<>()\\\"' \n") or word.startswith("<")
