"""YAML read the one bounded way: every file gpubot is handed in YAML (rules, tests, drills,
settings, alerts, snapshots, a must-gather's files) is parsed here, and every error about a
rule or test file names `file:line`.

Why it exists: YAML aliases let 600 bytes stand for a billion strings ("billion laughs").
PyYAML composes an alias as the same node again and constructs it as the same object, so
the load itself is cheap; whatever walks the result afterwards (the line numbers below, a
copy, an error message's repr, the facts) walks every copy, and took 77 s and 3 GB. So each
document's expansion is counted on its composed nodes, before anything is built from them,
and refused past the limit Kubernetes' own YAML reader sets (`_allowed_alias_share`).

A document nested deeper than `MAX_DEPTH` is refused too: the readers of what is built
recurse, and a thousand levels (libyaml's own limit) end in a RecursionError.

What it must never do: read a file past its size limit (`bot.input_files`); build (or walk) a
document before its aliases are counted; parse in pure Python when libyaml is there; let a
YAMLError or a RecursionError out as a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from bot.errors import InputError
from bot.input_files import HAND_WRITTEN, Limit, read_within
from bot.model import Lang
from bot.texts import say

Path_ = tuple[str | int, ...]
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# go-yaml's limits (gopkg.in/yaml.v3 decode.go, and v2.4.0 before it; Kubernetes reads YAML
# with them through sigs.k8s.io/yaml): a document of up to 400,000 decoded nodes may be 99%
# copies made by aliases; from 4,000,000 on, 10%; in between the share falls linearly. Nothing
# is refused until more than 100 nodes are copies and more than 1,000 decoded.
_RANGE_LOW, _RANGE_HIGH = 400_000, 4_000_000
_ALIASED_FREE, _DECODED_FREE = 100, 1_000

MAX_DEPTH = 100
"""How deep collections may nest. A Kubernetes object's deepest field (a pod's affinity term)
sits about a dozen levels down, a rule file's half that; libyaml stops at 1,000, where every
recursive reader of the result (a copy, a repr in an error message) would already have hit
Python's recursion limit of 1,000 frames."""


class InvalidYaml(InputError):
    """Text the YAML parser refuses; `line` (from 1) when it said where, and its `problem`."""

    def __init__(self, where: str, line: int | None, problem: str) -> None:
        super().__init__(f"{where}:{line}" if line else where, f"invalid YAML: {problem}")
        self.line = line
        self.problem = problem


class LocatedYaml:
    """Parsed YAML plus the line of every mapping key and sequence item."""

    def __init__(self, path: Path, data: Any, lines: dict[Path_, int]) -> None:
        self.path = path
        self.data = data
        self._lines = lines

    def where(self, location: Path_) -> str:
        """`file:line` of the deepest part of `location` that has a line."""
        for end in range(len(location), -1, -1):
            line = self._lines.get(tuple(location[:end]))
            if line is not None:
                return f"{self.path}:{line}"
        return str(self.path)


def load_located(path: Path, limit: Limit = HAND_WRITTEN) -> LocatedYaml:
    """One YAML document of the file at `path` (within `limit`), with the line of each part."""
    # Bytes, not text: libyaml reads the encoding (UTF-8, or UTF-16 with a BOM) and says
    # where a byte is not valid, as one InvalidYaml.
    [(root, data)] = _load(read_within(path, limit), str(path), single=True, roots=True)
    lines: dict[Path_, int] = {(): 1}
    if root is not None:
        _walk(root, lines, path)
    return LocatedYaml(path, data, lines)


def load_documents(text: str | bytes, where: str) -> list[Any]:
    """Every document of a YAML stream (`---` between them; an empty one left out), each
    refused when its aliases expand it past the limit."""
    found = _load(text, where, single=False, roots=False)
    return [data for _, data in found if data is not None]


def load_document(text: str | bytes, where: str) -> Any:
    """The one document of `text` (None when empty); more than one is InvalidYaml."""
    return _load(text, where, single=True, roots=False)[0][1]


def _load(
    text: str | bytes, where: str, *, single: bool, roots: bool
) -> list[tuple[yaml.Node | None, Any]]:
    """(root node when `roots`, else None; data) of each document, in libyaml when PyYAML
    was built with it: one parse, the node tree gives the lines and the data is built from
    that same tree (parsing twice in pure Python was most of a small `gpubot diagnose`). A
    document's nodes are let go once it is built, unless asked for: they are most of the
    memory a parse takes."""
    loader = _Loader(text)
    found: list[tuple[yaml.Node | None, Any]] = []
    try:
        while single or loader.check_node():
            root = loader.get_single_node() if single else loader.get_node()
            if root is not None:
                _check_document(root, where)
            data = loader.construct_document(root) if root is not None else None
            found.append((root if roots else None, data))
            if single:
                break
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InvalidYaml(where, mark.line + 1 if mark else None, problem) from exc
    except RecursionError as exc:  # pure-Python PyYAML only: libyaml stops at 1,000 levels
        raise InputError(where, say(Lang.EN, "input.nested_too_deep")) from exc
    finally:
        loader.dispose()
    return found


def _allowed_alias_share(decoded: int) -> float:
    """go-yaml's `allowedAliasRatio`: the share of a document's decoded nodes that may be
    copies made by aliases, given how many it has decoded so far."""
    if decoded <= _RANGE_LOW:
        return 0.99
    if decoded >= _RANGE_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _RANGE_LOW) / (_RANGE_HIGH - _RANGE_LOW)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return list(node.value)  # a SequenceNode: only collections are walked


_OPEN = -1
"""The size of a collection whose content is still being counted."""


def _check_document(root: yaml.Node, where: str) -> None:
    """Refuse a document nested deeper than `MAX_DEPTH`, or whose aliases expand it past
    go-yaml's limit, or without end. About a twentieth of the time libyaml takes to compose
    it (0.45 s for the 10 MiB of 50,000 alerts).

    go-yaml counts as it decodes: every node decoded (an alias is one, then everything it
    stands for again), and of those the ones decoded inside an alias, and fails as soon as
    the share of the second passes `_allowed_alias_share` of the first. The same count here
    walks each node once, in document order: a collection met again is an alias (an anchor
    comes before its aliases), standing for the `size` of its content, known by then. Within
    one alias the share only grows and the allowed share only falls, so checking after each
    alias refuses what go-yaml refuses, without expanding anything. A collection met again
    before its content ends holds an alias of itself: endless, refused.

    An alias of a scalar is counted as one more scalar, not as go-yaml's alias and copy:
    telling it from another scalar would keep every scalar in memory, and it cannot expand
    (each is a few bytes of text that stand for one), so only a document of millions of
    them differs from go-yaml's verdict.
    """
    sizes: dict[yaml.Node, int] = {root: _OPEN}  # a collection -> nodes its content decodes
    decoded, aliased = 1, 0
    stack: list[tuple[yaml.Node, Iterator[yaml.Node], list[int]]] = []
    stack.append((root, iter(_children(root)), [1]))
    while stack:
        node, children, total = stack[-1]
        for child in children:
            if type(child) is yaml.ScalarNode:
                decoded += 1
                total[0] += 1
                continue
            size = sizes.get(child)
            if size is None:
                if len(stack) >= MAX_DEPTH:
                    too_deep = say(Lang.EN, "input.yaml.too_deep", depth=MAX_DEPTH)
                    raise InputError(_at(where, child), too_deep)
                decoded += 1
                sizes[child] = _OPEN
                stack.append((child, iter(_children(child)), [1]))
                break
            if size == _OPEN:
                raise InputError(_at(where, node), say(Lang.EN, "input.yaml.endless"))
            decoded += 1 + size
            aliased += size
            total[0] += 1 + size
            allowed = _allowed_alias_share(decoded)
            if aliased > _ALIASED_FREE and decoded > _DECODED_FREE and aliased > allowed * decoded:
                raise InputError(
                    _at(where, node),
                    say(
                        Lang.EN,
                        "input.yaml.aliases",
                        nodes=f"{decoded:,}" if decoded < 10**12 else f"more than {10**12:,}",
                        share=_over(100 * aliased / decoded, 100 * allowed),
                        allowed=f"{100 * allowed:.0f}",
                    ),
                )
        else:
            stack.pop()
            sizes[node] = total[0]
            if stack:
                stack[-1][2][0] += total[0]


def _over(share: float, allowed: float) -> str:
    """`share` with as many decimals as it takes to read as more than `allowed` (99.0001%
    said as 99.0% beside a limit of 99% would read as no excess at all)."""
    for decimals in range(1, 7):
        if round(share, decimals) > round(allowed):
            break
    return f"{share:.{decimals}f}"


def _at(where: str, node: yaml.Node) -> str:
    """`where:line` of the node that holds the alias (the alias itself keeps no place)."""
    return f"{where}:{node.start_mark.line + 1}"


def _walk(root: yaml.Node, lines: dict[Path_, int], path: Path) -> None:
    """The line of every mapping key and sequence item below `root`, in document order, and
    the first key a mapping holds twice. Iterative: libyaml nests up to 1,000 levels, as
    deep as Python's default recursion limit."""
    pending: list[tuple[Path_, Iterator[tuple[str | int, yaml.Node, int]]]] = []

    def enter(at: Path_, node: yaml.Node) -> None:
        if isinstance(node, yaml.MappingNode):
            pending.append((at, _keyed(node, path)))
        elif isinstance(node, yaml.SequenceNode):
            items = ((i, item, item.start_mark.line + 1) for i, item in enumerate(node.value))
            pending.append((at, items))

    enter((), root)
    while pending:
        at, parts = pending[-1]
        part = next(parts, None)
        if part is None:
            pending.pop()
            continue
        name, node, line = part
        lines[(*at, name)] = line
        enter((*at, name), node)


def _keyed(node: yaml.MappingNode, path: Path) -> Iterator[tuple[str | int, yaml.Node, int]]:
    seen: set[str] = set()
    for key_node, value_node in node.value:
        key = str(key_node.value)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise InputError(f"{path}:{line}", f"duplicate key {key!r}")
        seen.add(key)
        yield key, value_node, line
