"""Label selectors as the Kubernetes API server parses and applies them.

`parse_label_selector` follows k8s.io/apimachinery `labels.Parse` (pkg/labels/selector.go):
the same lexer (special symbols `= ! ( ) , > <`, whitespace ` \\t\\r\\n`, `in`/`notin` as
keywords only where an operator may stand), the same recursive descent, the same validation of
keys and values (`gpusim.validation`) and the same error texts, so a bad `labelSelector` fails
with the message a real server puts in its 400 Status. It must never accept what labels.Parse
refuses, nor word a refusal differently.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum

from gpusim.validation import (
    SelectorError,
    aggregate,
    invalid,
    label_key_errors,
    label_value_errors,
    parse_int64,
)

__all__ = [
    "LabelOperator",
    "LabelRequirement",
    "LabelSelector",
    "SelectorError",
    "parse_label_selector",
]


# --------------------------------------------------------------------------------------------
# Label selectors


class LabelOperator(StrEnum):
    """k8s.io/apimachinery/pkg/selection.Operator, with its string values."""

    DOES_NOT_EXIST = "!"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    IN = "in"
    NOT_EQUALS = "!="
    NOT_IN = "notin"
    EXISTS = "exists"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_BINARY_OPERATORS = ", ".join(
    op.value
    for op in (
        LabelOperator.IN,
        LabelOperator.NOT_IN,
        LabelOperator.EQUALS,
        LabelOperator.DOUBLE_EQUALS,
        LabelOperator.NOT_EQUALS,
        LabelOperator.GREATER_THAN,
        LabelOperator.LESS_THAN,
    )
)


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One requirement: `key`, an operator and its values (sorted, without duplicates)."""

    key: str
    operator: LabelOperator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (LabelOperator.IN, LabelOperator.EQUALS, LabelOperator.DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (LabelOperator.NOT_IN, LabelOperator.NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op is LabelOperator.EXISTS:
            return self.key in labels
        if op is LabelOperator.DOES_NOT_EXIST:
            return self.key not in labels
        # GREATER_THAN, LESS_THAN: both sides must be int64s, else no match.
        if self.key not in labels or len(self.values) != 1:
            return False
        have = parse_int64(labels[self.key])
        want = parse_int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if op is LabelOperator.GREATER_THAN else have < want

    def __str__(self) -> str:
        op = self.operator
        if op is LabelOperator.EXISTS:
            return self.key
        if op is LabelOperator.DOES_NOT_EXIST:
            return "!" + self.key
        joined = ",".join(self.values)
        if op in (LabelOperator.IN, LabelOperator.NOT_IN):
            return f"{self.key} {op.value} ({joined})"
        symbol = {LabelOperator.GREATER_THAN: ">", LabelOperator.LESS_THAN: "<"}.get(op, op.value)
        return f"{self.key}{symbol}{joined}"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """An AND of requirements, sorted by key as labels.Parse leaves them."""

    requirements: tuple[LabelRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        """True when the selector selects everything."""
        return not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


class _Tok(Enum):
    """The lexer's tokens (selector.go `Token`)."""

    ERROR = 0
    END = 1
    CLOSED_PAR = 2
    COMMA = 3
    DOES_NOT_EXIST = 4
    DOUBLE_EQUALS = 5
    EQUALS = 6
    GREATER_THAN = 7
    IDENTIFIER = 8
    IN = 9
    LESS_THAN = 10
    NOT_EQUALS = 11
    NOT_IN = 12
    OPEN_PAR = 13


_STRING_TO_TOKEN = {
    ")": _Tok.CLOSED_PAR,
    ",": _Tok.COMMA,
    "!": _Tok.DOES_NOT_EXIST,
    "==": _Tok.DOUBLE_EQUALS,
    "=": _Tok.EQUALS,
    ">": _Tok.GREATER_THAN,
    "in": _Tok.IN,
    "<": _Tok.LESS_THAN,
    "!=": _Tok.NOT_EQUALS,
    "notin": _Tok.NOT_IN,
    "(": _Tok.OPEN_PAR,
}
_WHITESPACE = frozenset(" \t\r\n")
_SPECIAL = frozenset("=!(),><")
_NUL = "\0"  # what the Go lexer's read() returns at the end, and for a NUL in the input


class _Lexer:
    """selector.go `Lexer`: owns the text and the read position."""

    def __init__(self, text: str) -> None:
        self._s = text
        self._pos = 0

    def _read(self) -> str:
        if self._pos < len(self._s):
            ch = self._s[self._pos]
            self._pos += 1
            return ch
        return _NUL

    def _unread(self) -> None:
        self._pos -= 1

    def lex(self) -> tuple[_Tok, str]:
        ch = self._read()
        while ch in _WHITESPACE:
            ch = self._read()
        if ch == _NUL:
            return _Tok.END, ""
        self._unread()
        if ch in _SPECIAL:
            return self._scan_special_symbol()
        return self._scan_id_or_keyword()

    def _scan_id_or_keyword(self) -> tuple[_Tok, str]:
        buf: list[str] = []
        while True:
            ch = self._read()
            if ch == _NUL:
                break
            if ch in _SPECIAL or ch in _WHITESPACE:
                self._unread()
                break
            buf.append(ch)
        word = "".join(buf)
        return _STRING_TO_TOKEN.get(word, _Tok.IDENTIFIER), word

    def _scan_special_symbol(self) -> tuple[_Tok, str]:
        last: tuple[_Tok, str] | None = None
        buf = ""
        while True:
            ch = self._read()
            if ch == _NUL:
                break
            if ch not in _SPECIAL:
                self._unread()
                break
            buf += ch
            tok = _STRING_TO_TOKEN.get(buf)
            if tok is not None:
                last = (tok, buf)
            elif last is not None:
                self._unread()
                break
        if last is None:
            return _Tok.ERROR, f"error expected: keyword found '{buf}'"
        return last


class _RequirementError(Exception):
    """An error inside one requirement; labels.Parse prefixes it."""


class _Parser:
    """selector.go `Parser`: owns the scanned tokens and the position in them."""

    def __init__(self, text: str) -> None:
        lexer = _Lexer(text)
        self._items: list[tuple[_Tok, str]] = []
        while True:
            item = lexer.lex()
            self._items.append(item)
            if item[0] is _Tok.END:
                break
        self._pos = 0

    def _peek(self, values: bool) -> tuple[_Tok, str]:
        tok, lit = self._items[min(self._pos, len(self._items) - 1)]
        if values and tok in (_Tok.IN, _Tok.NOT_IN):
            tok = _Tok.IDENTIFIER
        return tok, lit

    def _take(self, values: bool) -> tuple[_Tok, str]:
        item = self._peek(values)
        self._pos += 1
        return item

    def parse(self) -> list[LabelRequirement]:
        requirements: list[LabelRequirement] = []
        while True:
            tok, lit = self._peek(values=True)
            if tok is _Tok.END:
                return requirements
            if tok not in (_Tok.IDENTIFIER, _Tok.DOES_NOT_EXIST):
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self._requirement())
            except _RequirementError as err:
                raise SelectorError(f"unable to parse requirement: {err}") from None
            tok, lit = self._take(values=True)
            if tok is _Tok.END:
                return requirements
            if tok is not _Tok.COMMA:
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            tok, lit = self._peek(values=True)
            if tok not in (_Tok.IDENTIFIER, _Tok.DOES_NOT_EXIST):
                raise SelectorError(f"found '{lit}', expected: identifier after ','")

    def _requirement(self) -> LabelRequirement:
        key, op = self._key_and_inferred_operator()
        if op in (LabelOperator.EXISTS, LabelOperator.DOES_NOT_EXIST):
            return _new_requirement(key, op, [])
        op = self._operator()
        if op in (LabelOperator.IN, LabelOperator.NOT_IN):
            values = self._value_set()
        else:
            values = self._exact_value()
        return _new_requirement(key, op, sorted(values))

    def _key_and_inferred_operator(self) -> tuple[str, LabelOperator | None]:
        op: LabelOperator | None = None
        tok, lit = self._take(values=True)
        if tok is _Tok.DOES_NOT_EXIST:
            op = LabelOperator.DOES_NOT_EXIST
            tok, lit = self._take(values=True)
        if tok is not _Tok.IDENTIFIER:
            raise _RequirementError(f"found '{lit}', expected: identifier")
        errs = label_key_errors(lit)
        if errs:
            raise _RequirementError(invalid("<nil>", lit, "; ".join(errs)))
        nxt, _ = self._peek(values=True)
        if nxt in (_Tok.END, _Tok.COMMA) and op is not LabelOperator.DOES_NOT_EXIST:
            op = LabelOperator.EXISTS
        return lit, op

    def _operator(self) -> LabelOperator:
        tok, lit = self._take(values=False)
        op = {
            _Tok.IN: LabelOperator.IN,
            _Tok.EQUALS: LabelOperator.EQUALS,
            _Tok.DOUBLE_EQUALS: LabelOperator.DOUBLE_EQUALS,
            _Tok.GREATER_THAN: LabelOperator.GREATER_THAN,
            _Tok.LESS_THAN: LabelOperator.LESS_THAN,
            _Tok.NOT_IN: LabelOperator.NOT_IN,
            _Tok.NOT_EQUALS: LabelOperator.NOT_EQUALS,
        }.get(tok)
        if op is None:
            raise _RequirementError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        return op

    def _value_set(self) -> set[str]:
        tok, lit = self._take(values=True)
        if tok is not _Tok.OPEN_PAR:
            raise _RequirementError(f"found '{lit}' expected: '('")
        tok, lit = self._peek(values=True)
        if tok in (_Tok.IDENTIFIER, _Tok.COMMA):
            found = self._identifiers()
            if self._take(values=True)[0] is not _Tok.CLOSED_PAR:
                raise _RequirementError(f"found '{lit}', expected: ')'")
            return found
        if tok is _Tok.CLOSED_PAR:  # "()"
            self._take(values=True)
            return {""}
        raise _RequirementError(f"found '{lit}', expected: ',', ')' or identifier")

    def _identifiers(self) -> set[str]:
        found: set[str] = set()
        while True:
            tok, lit = self._take(values=True)
            if tok is _Tok.IDENTIFIER:
                found.add(lit)
                nxt, nxt_lit = self._peek(values=True)
                if nxt is _Tok.COMMA:
                    continue
                if nxt is _Tok.CLOSED_PAR:
                    return found
                raise _RequirementError(f"found '{nxt_lit}', expected: ',' or ')'")
            if tok is _Tok.COMMA:  # "(," ",," and ",)" each stand for an empty value
                if not found:
                    found.add("")
                nxt, _ = self._peek(values=True)
                if nxt is _Tok.CLOSED_PAR:
                    found.add("")
                    return found
                if nxt is _Tok.COMMA:
                    self._take(values=True)
                    found.add("")
                continue
            raise _RequirementError(f"found '{lit}', expected: ',', or identifier")

    def _exact_value(self) -> set[str]:
        tok, _ = self._peek(values=True)
        if tok in (_Tok.END, _Tok.COMMA):
            return {""}
        tok, lit = self._take(values=True)
        if tok is _Tok.IDENTIFIER:
            return {lit}
        raise _RequirementError(f"found '{lit}', expected: identifier")


def _new_requirement(key: str, op: LabelOperator, values: list[str]) -> LabelRequirement:
    """labels.NewRequirement, with its field.ErrorList rendered as the server renders it."""
    errs: list[str] = []
    key_errs = label_key_errors(key)
    if key_errs:
        errs.append(invalid("key", key, "; ".join(key_errs)))
    if op in (LabelOperator.IN, LabelOperator.NOT_IN):
        if not values:
            errs.append(
                f"values: Invalid value: {_go_json_list(values)}: "
                "for 'in', 'notin' operators, values set can't be empty"
            )
    elif op in (LabelOperator.EQUALS, LabelOperator.DOUBLE_EQUALS, LabelOperator.NOT_EQUALS):
        if len(values) != 1:
            errs.append(
                f"values: Invalid value: {_go_json_list(values)}: "
                "exact-match compatibility requires one single value"
            )
    elif op in (LabelOperator.EXISTS, LabelOperator.DOES_NOT_EXIST):
        if values:
            errs.append(
                f"values: Invalid value: {_go_json_list(values)}: "
                "values set must be empty for exists and does not exist"
            )
    else:  # GREATER_THAN, LESS_THAN
        if len(values) != 1:
            errs.append(
                f"values: Invalid value: {_go_json_list(values)}: "
                "for 'Gt', 'Lt' operators, exactly one value is required"
            )
        for i, value in enumerate(values):
            if parse_int64(value) is None:
                errs.append(
                    invalid(
                        f"values[{i}]",
                        value,
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    )
                )
    for i, value in enumerate(values):
        value_errs = label_value_errors(value)
        if value_errs:
            errs.append(invalid(f"values[{i}][{key}]", value, "; ".join(value_errs)))
    if errs:
        raise _RequirementError(aggregate(errs))
    return LabelRequirement(key, op, tuple(values))


def _go_json_list(values: Sequence[str]) -> str:
    """json.Marshal of a []string, as field.Invalid renders a non-scalar bad value."""
    return json.dumps(list(values), separators=(",", ":"), ensure_ascii=False)


def parse_label_selector(text: str) -> LabelSelector:
    """Parse a `labelSelector` query parameter exactly as labels.Parse does.

    The empty string (or only whitespace) selects everything. Raises SelectorError with the
    API server's message on anything labels.Parse rejects.
    """
    requirements = _Parser(text).parse()
    requirements.sort(key=lambda r: r.key)
    return LabelSelector(tuple(requirements))
