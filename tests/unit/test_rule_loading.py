"""Rule files: a broken rule gives `file:line: what is wrong` and never stops the others."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from bot.config import Settings
from bot.diagnose import diagnose
from bot.facts.snapshots import Snapshot
from bot.model import ClusterFacts
from bot.rules.cel import Activation, Expression
from bot.rules.linting import lint_rules
from bot.rules.loading import load_rules
from tests.helpers.paths import RULES

GOOD = yaml.safe_load((RULES / "gpu-stack.yaml").read_text())["rules"][0]


def _write(path: Path, rules: list[dict[str, object]]) -> Path:
    path.write_text(yaml.safe_dump({"rules": rules}, allow_unicode=True, sort_keys=False))
    return path


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_the_shipped_rules_load_without_errors_and_lint_clean(settings: Settings) -> None:
    ruleset = load_rules([RULES])
    assert ruleset.errors == []
    assert lint_rules(ruleset, settings) == []


def test_unknown_field_is_reported_at_its_line_and_other_rules_still_load(tmp_path: Path) -> None:
    broken = {**GOOD, "id": "broken-one", "severty": "critical"}
    other = {**GOOD, "id": "still-here"}
    path = _write(tmp_path / "r.yaml", [broken, other])
    ruleset = load_rules([path])
    assert [r.id for r in ruleset.rules] == ["still-here"]
    [error] = ruleset.errors
    assert (
        str(error) == f"{path}:{_line_of(path, 'severty')}: rule broken-one: severty: unknown field"
    )


def test_missing_language_is_reported(tmp_path: Path) -> None:
    broken = {**GOOD, "title": {"en": "only English"}}
    path = _write(tmp_path / "r.yaml", [broken])
    [error] = load_rules([path]).errors
    assert "title.zh: Field required" in str(error)
    assert str(error).startswith(f"{path}:{_line_of(path, 'title:')}:")


def test_cause_lists_must_have_the_same_length(tmp_path: Path) -> None:
    broken = {**GOOD, "causes": {"zh": ["一"], "en": ["one", "two"]}}
    [error] = load_rules([_write(tmp_path / "r.yaml", [broken])]).errors
    assert "zh has 1 items but en has 2" in str(error)


def test_bad_cel_names_the_field_line_and_column(tmp_path: Path) -> None:
    broken = {**GOOD, "when": "node.ready =="}
    path = _write(tmp_path / "r.yaml", [broken])
    [error] = load_rules([path]).errors
    assert str(error).startswith(
        f"{path}:{_line_of(path, 'when:')}: rule gpu-capacity-zero: when: CEL"
    )
    assert "Syntax error" in str(error)


def test_undeclared_variable_is_a_compile_error(tmp_path: Path) -> None:
    broken = {**GOOD, "evidence": ["nod.name"]}
    [error] = load_rules([_write(tmp_path / "r.yaml", [broken])]).errors
    assert "evidence.0" in str(error) and "undeclared reference to 'nod.name'" in str(error)
    assert "container" not in str(error)


def test_duplicate_ids_and_duplicate_keys(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.yaml", [GOOD, GOOD])
    ruleset = load_rules([path])
    assert len(ruleset.rules) == 1
    assert "duplicate id, first defined at" in str(ruleset.errors[0])
    dup = tmp_path / "dup.yaml"
    dup.write_text("rules:\n  - id: a\n    id: b\n")
    [error] = load_rules([dup]).errors
    assert str(error) == f"{dup}:3: duplicate key 'id'"


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("rules:\n  - id: x\n    when: [unclosed\n")
    [error] = load_rules([path]).errors
    assert str(error).startswith(f"{path}:") and "invalid YAML" in str(error)


def test_lint_catches_a_misspelt_field(tmp_path: Path, settings: Settings) -> None:
    misspelt = {**GOOD, "when": "node.known && node.gpu.alocatable == 0"}
    ruleset = load_rules([_write(tmp_path / "r.yaml", [misspelt])])
    assert ruleset.errors == []
    [problem] = lint_rules(ruleset, settings)
    assert "when: NOT_FOUND" in str(problem) and "alocatable" in str(problem)


def test_lint_checks_each_rule_against_its_own_scope(tmp_path: Path, settings: Settings) -> None:
    # A node sees its pool's size, not the names of its members (a pool rule sees both): a
    # node rule reading them would fail on every node at run time, so lint says so first.
    node_rule = {**GOOD, "id": "reads-members", "when": "size(pool.nodes) > 1"}
    counted = {**GOOD, "id": "reads-size", "when": "pool.size > 1"}
    ruleset = load_rules([_write(tmp_path / "r.yaml", [node_rule, counted])])
    assert ruleset.errors == []
    [problem] = lint_rules(ruleset, settings)
    assert "reads-members" in str(problem) and "nodes" in str(problem)


def test_a_rule_failing_at_evaluation_does_not_stop_the_others(
    tmp_path: Path,
    settings: Settings,
    edited: Callable[..., Snapshot],
    facts_of: Callable[..., ClusterFacts],
) -> None:
    failing = {**GOOD, "id": "always-errors", "when": 'node.labels["no-such-label"] == "x"'}
    path = _write(tmp_path / "r.yaml", [failing, GOOD])
    ruleset = load_rules([path])
    snapshot = edited(
        {
            "kind": "Node",
            "name": "gpu-a2",
            "merge": {"status": {"allocatable": {"nvidia.com/gpu": "0"}}},
        }
    )
    result = diagnose(facts_of(snapshot), [], ruleset, settings)
    assert [(d.rule, d.node) for d in result.diagnoses] == [("gpu-capacity-zero", "gpu-a2")]
    assert result.errors and all("always-errors" in str(e) for e in result.errors)


@pytest.mark.parametrize("value", ["'a string'", "1"])
def test_a_condition_that_is_not_boolean_is_an_error(
    tmp_path: Path,
    value: str,
    settings: Settings,
    edited: Callable[..., Snapshot],
    facts_of: Callable[..., ClusterFacts],
) -> None:
    ruleset = load_rules([_write(tmp_path / "r.yaml", [{**GOOD, "when": value}])])
    result = diagnose(facts_of(edited()), [], ruleset, settings)
    assert result.diagnoses == []
    assert "expected true or false" in str(result.errors[0])


def test_blockers_of_the_wrong_shape_are_a_rule_error_and_a_lint_problem(
    tmp_path: Path,
    settings: Settings,
    edited: Callable[..., Snapshot],
    facts_of: Callable[..., ClusterFacts],
) -> None:
    weird = {**GOOD, "id": "weird-blockers", "blockers": '[{"kind": "weird"}]'}
    ruleset = load_rules([_write(tmp_path / "r.yaml", [weird, GOOD])])
    [problem] = lint_rules(ruleset, settings)
    assert "weird-blockers" in str(problem)
    assert "blockers: item 0: kind: Input should be" in str(problem)
    snapshot = edited(
        {
            "kind": "Node",
            "name": "gpu-a2",
            "merge": {"status": {"allocatable": {"nvidia.com/gpu": "0"}}},
        }
    )
    result = diagnose(facts_of(snapshot), [], ruleset, settings)
    assert [d.rule for d in result.diagnoses] == ["gpu-capacity-zero"]
    assert "weird-blockers" in str(result.errors[0])


def test_rule_variables_are_shared_by_its_expressions_and_linted(
    tmp_path: Path, settings: Settings
) -> None:
    with_variables = {
        **GOOD,
        "id": "uses-variables",
        "variables": {"zero": "node.gpu.allocatable == 0"},
        "when": "node.known && variables.zero",
    }
    misspelt = {**GOOD, "variables": {"zero": "node.gpu.alocatable == 0"}}
    ruleset = load_rules([_write(tmp_path / "r.yaml", [with_variables, misspelt])])
    assert ruleset.errors == []
    [problem] = lint_rules(ruleset, settings)
    assert "gpu-capacity-zero" in str(problem) and "variables.zero" in str(problem)
    bad_name = {**GOOD, "variables": {"not a name": "true"}}
    [error] = load_rules([_write(tmp_path / "bad.yaml", [bad_name])]).errors
    assert "is not an identifier" in str(error)


def test_lint_refuses_a_map_iterated_in_hash_order(tmp_path: Path, settings: Settings) -> None:
    # cel-cpp iterates a map in a hash order seeded per process: evidence made that way is
    # worded in another order by a restart or another replica.
    failing = "filter(c, node.components[c].failing).map(c, c)"
    unordered = {**GOOD, "id": "unordered", "evidence": [f"node.components.{failing}"]}
    ordered = {**GOOD, "id": "ordered", "evidence": [f"node.components.sortedKeys().{failing}"]}
    ruleset = load_rules([_write(tmp_path / "r.yaml", [unordered, ordered])])
    assert ruleset.errors == []
    [problem] = lint_rules(ruleset, settings)
    assert "unordered" in str(problem) and "evidence[0]" in str(problem)
    assert "iterate `node.components.sortedKeys()`" in str(problem)


def test_sorted_keys_gives_a_maps_keys_in_order_whatever_their_types() -> None:
    keys = [f"nvidia.com/mig-{i}g.{10 * i}gb" for i in (7, 1, 4, 3, 2)]
    values = {"pool": {"m": {k: 1 for k in keys}}}
    assert Expression("pool.m.sortedKeys()").evaluate(Activation(values)) == sorted(keys)
    mixed = Expression('{2: 0, "b": 0, 1: 0, "a": 0}.sortedKeys()').evaluate(Activation({}))
    assert mixed == [1, 2, "a", "b"]
