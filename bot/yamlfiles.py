"""YAML with line numbers: every error about a rule or test file names `file:line`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bot.errors import InputError

Path_ = tuple[str | int, ...]
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


def load_located(path: Path) -> LocatedYaml:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(str(path), exc.strerror or str(exc)) from exc
    # One parse, in libyaml when PyYAML was built with it: the node tree gives the lines, the
    # data is constructed from that same tree (parsing twice in pure Python was most of a
    # small `gpubot diagnose`).
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(where, f"invalid YAML: {problem}") from exc
    finally:
        loader.dispose()
    lines: dict[Path_, int] = {(): 1}
    if root is not None:
        _walk(root, (), lines, path)
    return LocatedYaml(path, data, lines)


def _walk(node: yaml.Node, at: Path_, lines: dict[Path_, int], path: Path) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise InputError(f"{path}:{line}", f"duplicate key {key!r}")
            seen.add(key)
            lines[(*at, key)] = line
            _walk(value_node, (*at, key), lines, path)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*at, index)] = item.start_mark.line + 1
            _walk(item, (*at, index), lines, path)
