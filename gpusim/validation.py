"""What kube-apiserver checks in a label key or value (and in the namespace and name a
ServiceAccount's user name holds), and how it words the refusal.

k8s.io/apimachinery `pkg/api/validate/content` (label keys are qualified names, values are
label values, Gt/Lt operands int64s) and `pkg/util/validation/field` (`field.Invalid`, an
`ErrorList` as one aggregate message), with Go's `%q` quoting, so a selector the server would
refuse fails here with the server's very words. Pure functions: no state, no I/O; they never
decide what a selector means, only whether its parts are well formed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


class SelectorError(ValueError):
    """A selector the API server would refuse with 400 BadRequest; str() is its message."""


# --------------------------------------------------------------------------------------------
# Go formatting helpers


def go_quote(s: str) -> str:
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


def invalid(path: str, value: str, detail: str) -> str:
    """field.Invalid(path, value, detail).Error() for a string value."""
    return f"{path}: Invalid value: {go_quote(value)}: {detail}"


def aggregate(messages: Sequence[str]) -> str:
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
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_LABEL_MAX = 63


def _byte_len(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def _dns1123_subdomain_errors(value: str) -> list[str]:
    errs = []
    if _byte_len(value) > _DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len_error(_DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_ERR, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1123_label(value: str) -> bool:
    """validation.IsDNS1123Label passes: what a namespace's name must be
    (ValidateNamespaceName)."""
    return _byte_len(value) <= _DNS1123_LABEL_MAX and bool(_DNS1123_LABEL_RE.fullmatch(value))


def is_dns1123_subdomain(value: str) -> bool:
    """validation.IsDNS1123Subdomain passes: what a ServiceAccount's name must be
    (ValidateServiceAccountName)."""
    return not _dns1123_subdomain_errors(value)


def label_key_errors(value: str) -> list[str]:
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


def label_value_errors(value: str) -> list[str]:
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


def parse_int64(s: str) -> int | None:
    """strconv.ParseInt(s, 10, 64): optional sign, ASCII digits, int64 range; else None."""
    if not _INT64_RE.fullmatch(s):
        return None
    n = int(s)
    return n if -(2**63) <= n < 2**63 else None
