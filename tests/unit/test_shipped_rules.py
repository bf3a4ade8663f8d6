"""The rules we ship: every runbook symptom covered, tested both ways, in both languages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.config import Settings
from bot.roots.offline import rule_test_files, run_rule_test
from bot.rules.loading import load_rules
from bot.rules.schema import Rule, Text, TextList
from bot.rules.testing import RuleTest, load_test_file
from tests.helpers.paths import RULES

REQUIRED = [
    "node-not-ready",
    "gpu-labels-missing",
    "gpu-capacity-zero",
    "gpu-capacity-short",
    "device-plugin-crashloop",
    "gpu-operator-component-failing",
    "driver-version-drift",
    "driver-upgrade-failed",
    "driver-upgrade-stuck",
    "gpu-xid-error",
    "gpu-fell-off-bus",
    "gpu-ecc-error",
    "nvlink-error",
    "fabric-manager-down",
    "gpu-thermal-power",
    "mig-config-failed",
    "mig-profile-mismatch",
    "drain-stuck",
    "cordoned-node-receiving-pods",
    "uncordoned-before-health-gate",
    "gpu-pods-pending",
    "evicted-pods-not-rescheduled",
    "pool-wide-failure",
    "node-flapping",
    # Found in real reports (rules/tests/real): kubelet's device manager out of step with the
    # plugin, and containers that lost their devices.
    "gpu-admission-rejected",
    "gpu-access-lost",
]
# NVIDIA's Xid catalog (docs.nvidia.com Xid errors) and the EKS node-repair fatal set.
XID_CODES = {
    13,
    31,
    43,
    45,
    48,
    63,
    64,
    74,
    79,
    92,
    94,
    95,
    46,
    62,
    109,
    119,
    120,
    *range(144, 151),
}
EKS_FATAL = {
    46,
    48,
    54,
    62,
    63,
    64,
    74,
    79,
    95,
    109,
    110,
    119,
    120,
    136,
    140,
    142,
    143,
    151,
    155,
    156,
    158,
}
PLUGIN_SKIPS = {13, 31, 43, 45, 68, 109}
CJK = re.compile(r"[\u4e00-\u9fff]")

RULESET = load_rules([RULES])


def _cases() -> list[tuple[str, RuleTest, str, Path]]:
    cases = []
    for file in rule_test_files(RULES):
        parsed, where = load_test_file(file)
        cases += [
            (f"{file.name}::{t.name}", t, where(i), file.parent) for i, t in enumerate(parsed.tests)
        ]
    return cases


CASES = _cases()


def test_every_runbook_symptom_has_its_rule() -> None:
    assert RULESET.errors == []
    assert sorted(r.id for r in RULESET.rules) == sorted(REQUIRED)


@pytest.mark.parametrize(("case", "test", "where", "base"), CASES, ids=[c[0] for c in CASES])
def test_rule_case(case: str, test: RuleTest, where: str, base: Path) -> None:
    outcome = run_rule_test(test, where, base, RULESET, Settings())
    assert outcome.failures == [], where


@pytest.mark.parametrize("rule_id", REQUIRED)
def test_each_rule_has_a_firing_and_a_non_firing_test(rule_id: str) -> None:
    firing = [t for _, t, _, _ in CASES if any(e.rule == rule_id for e in t.expect)]
    quiet = [
        t
        for _, t, _, _ in CASES
        if rule_id in t.about and not any(e.rule == rule_id for e in t.expect)
    ]
    assert firing, f"no test where {rule_id} fires"
    assert quiet, f"no test (about: [{rule_id}]) where {rule_id} deliberately does not fire"


def _texts(rule: Rule) -> list[tuple[str, Text | TextList]]:
    texts: list[tuple[str, Text | TextList]] = [
        ("title", rule.title),
        ("diagnosis", rule.diagnosis),
        ("causes", rule.causes),
        ("check_first", rule.check_first),
        ("rollback", rule.rollback),
    ]
    texts += [(f"runbook[{i}]", step.text) for i, step in enumerate(rule.runbook)]
    if rule.expected:
        texts.append(("expected.note", rule.expected.note))
    return texts


@pytest.mark.parametrize("rule", [r.spec for r in RULESET.rules], ids=lambda r: r.id)
def test_texts_exist_in_chinese_and_english(rule: Rule) -> None:
    for name, text in _texts(rule):
        zh = text.zh if isinstance(text.zh, list) else [text.zh]
        en = text.en if isinstance(text.en, list) else [text.en]
        assert all(CJK.search(t) for t in zh), f"{rule.id}.{name}.zh is not Chinese: {zh}"
        assert not any(CJK.search(t) for t in en), f"{rule.id}.{name}.en has Chinese: {en}"
        assert len(zh) == len(en)


def test_xid_table_is_data_covering_domain_codes() -> None:
    catalog = RULESET.xid_catalog
    assert catalog is not None
    by_code = {code: e for e in catalog.entries for code in e.codes}
    assert set(by_code) >= XID_CODES
    for code in EKS_FATAL & set(by_code):
        assert by_code[code].fatal, f"Xid {code} is fatal for EKS"
    for code in PLUGIN_SKIPS & set(by_code):
        assert not by_code[code].marks_unhealthy, f"the device plugin skips Xid {code}"
    texts = [(e.meaning, e.action) for e in catalog.entries]
    texts.append((catalog.unknown.meaning, catalog.unknown.action))
    for meaning, action in texts:
        for text in (meaning, action):
            assert CJK.search(text.zh) and not CJK.search(text.en), text
