"""The documents stand on their own (issue 19 item 11): every link in the README and docs/
leads to a file of this repository, and none names the design notes the project was started
from, which a reader of the repository does not have."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted(
    str(path.relative_to(_REPO)) for path in [_REPO / "README.md", *(_REPO / "docs").glob("*.md")]
)
# Markdown links and images: [text](target) with an optional #anchor.
LINK = re.compile(r"\]\(([^)\s]+)\)")
OUTSIDE = re.compile(r"\.\./shared|\b(?:DESIGN|STYLE|DOMAIN)\.md\b")


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_link_leads_into_the_repository(document: str) -> None:
    path = _REPO / document
    text = path.read_text()
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor on the same page
        resolved = (path.parent / target.split("#", 1)[0]).resolve()
        if not resolved.is_relative_to(_REPO) or not resolved.exists():
            broken.append(target)
    assert broken == [], f"{document}: links that lead nowhere in the repository"
    assert OUTSIDE.findall(text) == [], f"{document}: names a file outside the repository"


ARCHITECTURE = _REPO / "docs" / "architecture.md"
_ROOTS = "bot|gpusim|tests|docs|rules|deploy|helm|benchmarks|drills|ci"
_PATH = re.compile(rf"(?<![\w./-])((?:{_ROOTS})/[\w./-]*\w)")
_DOTTED = re.compile(r"`((?:bot|gpusim)(?:\.\w+)+)")
_TREE_LINE = re.compile(r"^([│ ]*)(?:├──|└──) (\S+)")
_MEMBER = re.compile(r"`([A-Z]\w*[a-z]\w*)\.(_?[a-z]\w*)")


def _tree_paths(text: str) -> list[str]:
    """The files and folders the page's trees draw, each rebuilt from its indentation."""
    paths: list[str] = []
    for block in re.findall(r"```\n(.*?)```", text, re.S):
        lines = block.splitlines()
        if not lines or not re.fullmatch(r"(bot|gpusim|tests)/", lines[0].split()[0]):
            continue
        stack = [lines[0].split()[0].rstrip("/")]
        for line in lines[1:]:
            found = _TREE_LINE.match(line)
            if found is None:
                continue
            depth = len(found.group(1)) // 4 + 1
            del stack[depth:]
            name = found.group(2)
            paths.append("/".join([*stack, name.rstrip("/")]))
            if name.endswith("/"):
                stack.append(name.rstrip("/"))
    return paths


def _names_in(module: Path) -> set[str]:
    """What a module defines or imports by name at any depth: functions, classes, names
    assigned at its top."""
    found = re.findall(r"^\s*(?:def|class)\s+(\w+)|^(\w+)\s*[:=]", module.read_text(), re.M)
    return {name for pair in found for name in pair if name}


def _classes() -> dict[str, list[tuple[set[str], list[str]]]]:
    """Every class of bot/ and gpusim/ by name (two modules may each have one): the members
    it defines (methods, fields, attributes its methods set on self), its bases' names."""
    found: dict[str, list[tuple[set[str], list[str]]]] = {}
    for path in [*_REPO.glob("bot/**/*.py"), *_REPO.glob("gpusim/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            members = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            members |= {
                n.target.id
                for n in node.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
            }
            members |= {
                t.id
                for n in node.body
                if isinstance(n, ast.Assign)
                for t in n.targets
                if isinstance(t, ast.Name)
            }
            members |= {
                n.attr
                for n in ast.walk(node)
                if isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name)
                and n.value.id == "self"
                and isinstance(n.ctx, ast.Store)
            }
            bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases]
            found.setdefault(node.name, []).append((members, bases))
    return found


def _members(owner: str, classes: dict[str, list[tuple[set[str], list[str]]]]) -> set[str]:
    return set().union(
        *(
            members.union(*(_members(base, classes) for base in bases))
            for members, bases in classes.get(owner, [])
        )
    )


def test_every_path_and_module_the_architecture_page_names_exists() -> None:
    """The page is the map of the code (issue 30: it had paths and names that no longer
    held): every file or folder it names, every file its trees draw and every module it
    names by its dotted path is in the repository, a name after a module is defined there,
    and a `Class.member` it names is a class of gpubot's with that member."""
    text = ARCHITECTURE.read_text()
    missing = [p for p in _PATH.findall(text) if not (_REPO / p.split("::")[0]).exists()]
    missing += [p for p in _tree_paths(text) if not (_REPO / p).exists()]
    for dotted in _DOTTED.findall(text):
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            base = _REPO.joinpath(*parts[:cut])
            module = base.with_suffix(".py")
            if not module.exists():
                module = base / "__init__.py"
            if module.exists():
                rest = parts[cut:]
                if rest and rest[0] not in _names_in(module):
                    missing.append(dotted)
                break
        else:
            missing.append(dotted)
    classes = _classes()
    for owner, member in _MEMBER.findall(text):
        if member not in _members(owner, classes):
            missing.append(f"{owner}.{member}")
    assert sorted(set(missing)) == []
