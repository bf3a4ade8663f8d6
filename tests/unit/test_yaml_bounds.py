"""YAML read the one bounded way (`bot.yamlfiles`): aliases held to the limit Kubernetes' own
YAML reader sets (go-yaml v3 decode.go, `allowedAliasRatio`, which sigs.k8s.io/yaml reads
with), nesting held to 100 levels, a document that holds itself refused; what real files use
(anchors in the shipped alert mapping and rule tests) still read."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import InputError
from bot.yamlfiles import MAX_DEPTH, load_document, load_documents, load_located
from tests.helpers.paths import RULES


def _copies(items: int, aliases: int) -> str:
    """A list of `items` scalars under an anchor (a node of `items + 1`), then `aliases`
    aliases of it on line 2."""
    return f"base: &b [{', '.join(['1'] * items)}]\nuses: [{', '.join(['*b'] * aliases)}]\n"


def test_aliases_are_read_up_to_the_share_go_yaml_accepts_and_refused_past_it() -> None:
    """go-yaml counts every node decoded (an alias one, then the nodes it copies) and those
    copied; past 1,000 decoded and 100 copied, at most 99% may be copies (up to 400,000).
    Here 5 + 200 nodes are written and each alias decodes 201 more, 200 of them copies: after
    199 aliases 98.998% are copies, after the 200th 99.0001%."""
    read = load_document(_copies(199, 199), "doc")
    assert len(read["uses"]) == 199 and read["uses"][0] is read["base"]
    with pytest.raises(InputError) as refused:
        load_document(_copies(199, 200), "doc")
    assert refused.value.where == "doc:2"
    assert refused.value.message.startswith(
        "by here its YAML aliases have made 40,404 nodes of it, 99.0001% of them copies: more "
        "than the 99% Kubernetes' YAML reader accepts at this size"
    )


def test_a_small_node_may_be_copied_as_often_as_the_text_says() -> None:
    """Each alias of a 50-node list adds 51 decoded nodes, 50 of them copies: 98%, under 99%
    however many there are. Copies of scalars are as cheap as the text that asks for them."""
    read = load_document(_copies(49, 2_000), "doc")
    assert len(read["uses"]) == 2_000
    scalars = "a: &a x\nb: [" + ", ".join(["*a"] * 20_000) + "]\n"
    assert len(load_document(scalars, "doc")["b"]) == 20_000


@pytest.mark.parametrize(
    "text",
    ["a: &a [*a]\n", "a: &a {b: {c: *a}}\n", "- &a [1, [2, *a]]\n"],
)
def test_a_node_that_holds_its_own_alias_is_refused(text: str) -> None:
    """PyYAML builds such a node as a list that contains itself: every walk of it is endless."""
    with pytest.raises(InputError, match="a document without end"):
        load_document(text, "doc")


def test_nesting_is_read_to_its_limit_and_refused_past_it() -> None:
    deepest = "x: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"
    assert load_document(deepest, "doc") is not None
    with pytest.raises(InputError, match=f"nested more than {MAX_DEPTH} levels deep"):
        load_document("x: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n", "doc")


def test_each_document_of_a_stream_is_counted_on_its_own() -> None:
    """Anchors belong to their document: a stream of many small ones is no bomb."""
    stream = "---\n".join(_copies(199, 150) for _ in range(20))
    assert len(load_documents(stream, "stream")) == 20


def test_the_shipped_files_with_anchors_still_read_with_their_lines(tmp_path: Path) -> None:
    mapping = load_located(RULES / "alerts.yaml")
    assert mapping.data["symptoms"] and mapping.where(("symptoms",)).endswith(":65")
    tests = load_located(RULES / "tests" / "drain.yaml")
    assert tests.data["tests"]


def test_bytes_that_are_not_utf8_are_one_input_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_bytes(b'rules: []\nx: "\xff"\n')
    with pytest.raises(InputError) as refused:
        load_located(path)
    assert refused.value.where == str(path) and "invalid YAML" in refused.value.message
