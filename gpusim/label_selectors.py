"""Label and field selectors as the Kubernetes API server parses and applies them.

`parse_label_selector` follows k8s.io/apimachinery `labels.Parse` (pkg/labels/selector.go):
the same lexer (special symbols `= ! ( ) , > <`, whitespace ` \\t\\r\\n`, `in`/`notin` as
keywords only where an operator may stand), the same recursive descent, the same validation of
keys and values (pkg/api/validate/content: label keys are qualified names, values are label
values) and the same error texts, so a bad `labelSelector` fails with the message a real
server puts in its 400 Status.

`parse_field_selector` follows `fields.ParseSelector` (pkg/fields/selector.go): terms split at
unescaped commas and sorted, each split at the first `!=`, `==` or `=`, the value unescaped
(`\\,` `\\=` `\\\\`), and then the field label converted the way the API server's scheme does
(pkg/apis/core/v1/conversion.go): kinds with their own conversion function reject other labels
with `field label not supported: X`, every other kind takes only `metadata.name` and
`metadata.namespace` and rejects the rest with runtime.DefaultMetaV1FieldSelectorConversion's
message. Matching reads the field set the registry builds for the kind (`ToSelectableFields`
in pkg/registry/core/*/strategy.go) from the object as `kubectl get -o json` prints it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any, Literal

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelOperator",
    "LabelRequirement",
    "LabelSelector",
    "SelectorError",
    "parse_field_selector",
    "parse_label_selector",
    "selectable_fields",
]


class SelectorError(ValueError):
    """A selector the API server would refuse with 400 BadRequest; str() is its message."""


# --------------------------------------------------------------------------------------------
# Go formatting helpers


def _go_quote(s: str) -> str:
    """Go's strconv.Quote (the %q verb) for a valid UTF-8 string."""
    out = ['"']
    for ch in s:
        code = ord(ch)
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def _invalid(path: str, value: str, detail: str) -> str:
    """field.Invalid(path, value, detail).Error() for a string value."""
    return f"{path}: Invalid value: {_go_quote(value)}: {detail}"


def _aggregate(messages: Sequence[str]) -> str:
    """field.ErrorList.ToAggregate().Error(): duplicates dropped, several in brackets."""
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


# --------------------------------------------------------------------------------------------
# Validation of label keys and values (k8s.io/apimachinery/pkg/api/validate/content)


def _regex_error(msg: str, regex: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{regex}')"
    text = msg + " (e.g. "
    for i, example in enumerate(examples):
        if i > 0:
            text += " or "
        text += f"'{example}', "
    return text + f"regex used for validation is '{regex}')"


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} bytes"


_EMPTY_ERROR = "must be non-empty"

_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_ERR = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_KEY_MAX = 63
_LABEL_KEY_RE = re.compile(_LABEL_KEY_FMT)

_LABEL_VALUE_FMT = f"({_LABEL_KEY_FMT})?"
_LABEL_VALUE_ERR = (
    "a valid label must be an empty string or consist of alphanumeric characters, "
    "'-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_MAX = 63
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_ERR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MAX = 253
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)


def _byte_len(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def _dns1123_subdomain_errors(value: str) -> list[str]:
    errs = []
    if _byte_len(value) > _DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len_error(_DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_ERR, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def _label_key_errors(value: str) -> list[str]:
    """content.IsLabelKey (validation.IsQualifiedName)."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + _EMPTY_ERROR)
        else:
            errs.extend("prefix part " + m for m in _dns1123_subdomain_errors(prefix))
    else:
        return [
            "a valid label key "
            + _regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part " + _EMPTY_ERROR)
    elif _byte_len(name) > _LABEL_KEY_MAX:
        errs.append("name part " + _max_len_error(_LABEL_KEY_MAX))
    if not _LABEL_KEY_RE.fullmatch(name):
        errs.append(
            "name part "
            + _regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def _label_value_errors(value: str) -> list[str]:
    """content.IsLabelValue (validation.IsValidLabelValue)."""
    errs = []
    if _byte_len(value) > _LABEL_VALUE_MAX:
        errs.append(_max_len_error(_LABEL_VALUE_MAX))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(
            _regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
        )
    return errs


_INT64_RE = re.compile("[+-]?[0-9]+")


def _parse_int64(s: str) -> int | None:
    """strconv.ParseInt(s, 10, 64): optional sign, ASCII digits, int64 range; else None."""
    if not _INT64_RE.fullmatch(s):
        return None
    n = int(s)
    return n if -(2**63) <= n < 2**63 else None


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
        have = _parse_int64(labels[self.key])
        want = _parse_int64(self.values[0])
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
        errs = _label_key_errors(lit)
        if errs:
            raise _RequirementError(_invalid("<nil>", lit, "; ".join(errs)))
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
    key_errs = _label_key_errors(key)
    if key_errs:
        errs.append(_invalid("key", key, "; ".join(key_errs)))
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
            if _parse_int64(value) is None:
                errs.append(
                    _invalid(
                        f"values[{i}]",
                        value,
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    )
                )
    for i, value in enumerate(values):
        value_errs = _label_value_errors(value)
        if value_errs:
            errs.append(_invalid(f"values[{i}][{key}]", value, "; ".join(value_errs)))
    if errs:
        raise _RequirementError(_aggregate(errs))
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


# --------------------------------------------------------------------------------------------
# Field selectors

_FieldOp = Literal["=", "!="]


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """`field=value` (also written `==`) or `field!=value`, after field label conversion."""

    field: str
    operator: _FieldOp
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        have = fields.get(self.field, "")
        return have == self.value if self.operator == "=" else have != self.value

    def __str__(self) -> str:
        return f"{self.field}{self.operator}{_escape_field_value(self.value)}"


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """An AND of field requirements for one resource (plural name, core group)."""

    resource: str
    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        """True when the selector selects everything."""
        return not self.requirements

    def matches(self, obj: Mapping[str, Any]) -> bool:
        if not self.requirements:
            return True
        fields = selectable_fields(obj, self.resource)
        return all(r.matches(fields) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _escape_field_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape_field_value(value: str) -> str:
    """fields.UnescapeValue."""
    if not any(c in value for c in "\\,="):
        return value
    out: list[str] = []
    in_slash = False
    for c in value:
        if in_slash:
            if c not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c in ",=":
            # Go prints the rune with %v: its code point in decimal.
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    """fields.splitTerms: split at commas not escaped by a backslash (escapes kept)."""
    if not text:
        return []
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, c in enumerate(text):
        if in_slash:
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """fields.splitTerm: the first `!=`, `==` or `=` (tried in that order at each position)."""
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


_ObjectFields = Callable[[Mapping[str, Any]], dict[str, str]]


def _get(obj: Mapping[str, Any], *path: str) -> Any:
    node: Any = obj
    for part in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def _text(value: Any) -> str:
    """A JSON scalar as the field set holds it: Go's zero value for a missing field."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _meta(obj: Mapping[str, Any], namespaced: bool) -> dict[str, str]:
    fields = {"metadata.name": _text(_get(obj, "metadata", "name"))}
    if namespaced:
        fields["metadata.namespace"] = _text(_get(obj, "metadata", "namespace"))
    return fields


def _pod_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    # Internal PodStatus keeps only podIPs; the v1 -> internal conversion makes podIP
    # authoritative when set and falls back to podIPs[0] otherwise.
    pod_ip = _text(_get(obj, "status", "podIP"))
    pod_ips = _get(obj, "status", "podIPs")
    if not pod_ip and isinstance(pod_ips, list) and pod_ips and isinstance(pod_ips[0], Mapping):
        pod_ip = _text(pod_ips[0].get("ip"))
    return {
        "spec.nodeName": _text(_get(obj, "spec", "nodeName")),
        "spec.restartPolicy": _text(_get(obj, "spec", "restartPolicy")),
        "spec.schedulerName": _text(_get(obj, "spec", "schedulerName")),
        "spec.serviceAccountName": _text(_get(obj, "spec", "serviceAccountName")),
        "spec.hostNetwork": _text(bool(_get(obj, "spec", "hostNetwork"))),
        "status.phase": _text(_get(obj, "status", "phase")),
        "status.podIP": pod_ip,
        "status.nominatedNodeName": _text(_get(obj, "status", "nominatedNodeName")),
        **_meta(obj, namespaced=True),
    }


def _node_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    return {
        **_meta(obj, namespaced=False),
        "spec.unschedulable": _text(bool(_get(obj, "spec", "unschedulable"))),
    }


def _event_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    # JSON `reportingComponent` is the internal ReportingController; `source` falls back to it.
    reporting = _text(obj.get("reportingComponent"))
    source = _text(_get(obj, "source", "component")) or reporting
    involved = {
        f"involvedObject.{name}": _text(_get(obj, "involvedObject", name))
        for name in (
            "kind",
            "namespace",
            "name",
            "uid",
            "apiVersion",
            "resourceVersion",
            "fieldPath",
        )
    }
    return {
        **involved,
        "reason": _text(obj.get("reason")),
        "reportingComponent": reporting,
        "source": source,
        "type": _text(obj.get("type")),
        **_meta(obj, namespaced=True),
    }


def _namespace_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    return {
        **_meta(obj, namespaced=False),
        "status.phase": _text(_get(obj, "status", "phase")),
        "name": _text(_get(obj, "metadata", "name")),  # kept by the server for compatibility
    }


def _secret_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    return {**_meta(obj, namespaced=True), "type": _text(obj.get("type"))}


def _service_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    return {
        **_meta(obj, namespaced=True),
        "spec.clusterIP": _text(_get(obj, "spec", "clusterIP")),
        "spec.type": _text(_get(obj, "spec", "type")),
    }


def _replication_controller_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    replicas = _get(obj, "status", "replicas")
    return {**_meta(obj, namespaced=True), "status.replicas": _text(replicas or 0)}


def _default_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    # A cluster-scoped object has no namespace: "" either way, as on the server.
    return _meta(obj, namespaced=True)


@dataclass(frozen=True, slots=True)
class _Kind:
    labels: frozenset[str]  # field labels the kind's conversion function accepts
    fields: _ObjectFields
    aliases: Mapping[str, str]


# The core/v1 kinds with their own field label conversion function (conversion.go).
_KINDS: dict[str, _Kind] = {
    "pods": _Kind(
        frozenset(
            {
                "metadata.name",
                "metadata.namespace",
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.podIPs",  # accepted, but not in the field set: always ""
                "status.nominatedNodeName",
            }
        ),
        _pod_fields,
        {"spec.host": "spec.nodeName"},  # for old v1 clients
    ),
    "nodes": _Kind(frozenset({"metadata.name", "spec.unschedulable"}), _node_fields, {}),
    "events": _Kind(
        frozenset(
            {
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
                "metadata.namespace",
                "metadata.name",
            }
        ),
        _event_fields,
        {},
    ),
    "namespaces": _Kind(frozenset({"status.phase", "metadata.name"}), _namespace_fields, {}),
    "secrets": _Kind(
        frozenset({"type", "metadata.namespace", "metadata.name"}), _secret_fields, {}
    ),
    "services": _Kind(
        frozenset({"metadata.namespace", "metadata.name", "spec.clusterIP", "spec.type"}),
        _service_fields,
        {},
    ),
    "replicationcontrollers": _Kind(
        frozenset({"metadata.name", "metadata.namespace", "status.replicas"}),
        _replication_controller_fields,
        {},
    ),
}


def _convert_field_label(resource: str, label: str) -> str:
    kind = _KINDS.get(resource)
    if kind is None:  # runtime.DefaultMetaV1FieldSelectorConversion
        if label in ("metadata.name", "metadata.namespace"):
            return label
        raise SelectorError(
            f"{_go_quote(label)} is not a known field selector: only "
            '"metadata.name", "metadata.namespace"'
        )
    if label in kind.labels:
        return label
    if label in kind.aliases:
        return kind.aliases[label]
    raise SelectorError(f"field label not supported: {label}")


def selectable_fields(obj: Mapping[str, Any], resource: str) -> dict[str, str]:
    """The field set the API server matches field selectors against, for `resource`."""
    kind = _KINDS.get(resource)
    return (kind.fields if kind else _default_fields)(obj)


def parse_field_selector(text: str, resource: str) -> FieldSelector:
    """Parse a `fieldSelector` query parameter for `resource` (plural, e.g. "pods").

    fields.ParseSelector first (every term, in sorted order), then the scheme's field label
    conversion for the resource's kind; the first failure raises SelectorError with the API
    server's message. The empty string selects everything.
    """
    terms: list[tuple[str, _FieldOp, str]] = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        lhs, op, rhs = split
        terms.append((lhs, "!=" if op == "!=" else "=", _unescape_field_value(rhs)))
    requirements = tuple(
        FieldRequirement(_convert_field_label(resource, field), op, value)
        for field, op, value in terms
    )
    return FieldSelector(resource, requirements)
