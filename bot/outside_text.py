"""Text from outside (alert labels, object names, people's words) checked, not trusted, and
shown so that what a person reads is what the text is.

Why it exists: a `Hostname` label of `gpu-a1` with a zero-width space, a right-to-left
override, isolates or a Cyrillic `а` renders exactly as `gpu-a1`. Taken as a node's name it
opened incidents for nodes the cluster does not have, and shown as it is it read as the real
node. Two answers, defined once here: whether a name could be a Kubernetes object's at all
(`kubernetes_name`), and how a name or a text from outside is written for a person
(`shown_name`, `visible`). Every renderer (Slack, console, Markdown) and every sentence that
names an outside node calls these, never a copy.

What it must never do: decide whether a node exists (only the cluster's node list says so:
`bot.facts.collecting`), or change a name that could be a node's: a real node's name is shown
byte for byte as the API server holds it.
"""

from __future__ import annotations

import re
import unicodedata

# What the API server accepts (k8s.io/apimachinery/pkg/util/validation: IsDNS1123Subdomain,
# IsDNS1123Label). Node names are subdomains: k8s.io/kubernetes pkg/apis/core/validation has
# `ValidateNodeName = apimachineryvalidation.NameIsDNSSubdomain`; pods too; namespaces are
# labels.
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN_MAX = 253
_LABEL_MAX = 63


def kubernetes_name(value: str, *, label: bool = False) -> bool:
    """Whether `value` is a name the API server would accept for a node or pod (a DNS-1123
    subdomain: lowercase ASCII letters and digits, '-' and '.', at most 253), or with `label`
    for a namespace (a DNS-1123 label, at most 63). No invisible, bidi or look-alike character
    can be in such a name: a name with one is no node's, whatever it looks like."""
    limit, pattern = (_LABEL_MAX, _LABEL) if label else (_SUBDOMAIN_MAX, _SUBDOMAIN)
    return 0 < len(value) <= limit and pattern.fullmatch(value) is not None


def shown_name(name: str) -> str:
    """A name from outside as a person may read it: a name the API server would accept as it
    is; any other with every character that is not printable ASCII written as its escape
    (`gpu-a1\\u200b`, `gpu-\\u04301`) and a backslash doubled, so two names that look alike are
    never shown alike and no escape can be forged."""
    if kubernetes_name(name):
        return name
    return name.encode("unicode_escape").decode("ascii")


# Characters that change how the text around them is shown, or are not shown at all: controls
# (Cc) but the line breaks and tabs text is laid out with, format characters (Cf: zero-width
# spaces and joiners, bidi embeddings, overrides and isolates, the BOM, the soft hyphen), line
# and paragraph separators (Zl, Zp), and lone surrogates (Cs), which JSON may carry.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_LAYOUT = frozenset("\n\t")


def _hidden(char: str) -> bool:
    return char not in _LAYOUT and unicodedata.category(char) in _HIDDEN_CATEGORIES


def visible(text: str) -> str:
    """`text` with every character that is invisible or reorders the text around it written
    as its escape (`\\u202e`): a summary with a right-to-left override no longer turns the
    rest of the line around, and a zero-width space is seen. Everything else (Chinese,
    accents, emoji) is left as it is; only where the text is a name does `shown_name` go
    further."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(_escape(c) if _hidden(c) else c for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
