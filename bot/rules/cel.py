"""The one place that imports the CEL runtime (cel-expr-python, Google's cel-cpp bindings).

Variables are declared dynamic: rule files address plain maps built from the facts, and
`gpubot rules lint` catches misspelt fields by evaluating every expression against
reference facts. Evaluation errors come back as values, never as exceptions that could stop
the other rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cel_expr_python.cel as _cel
from cel_expr_python.ext.ext_strings import ExtStrings

from bot.errors import RuleError

VARIABLES = ("node", "alerts", "xids", "pool", "cluster", "settings", "findings", "variables")

# The strings extension (join, split, upperAscii, ...) is the one Kubernetes enables too.
_ENV = _cel.NewEnv(variables={name: _cel.Type.DYN for name in VARIABLES}, extensions=[ExtStrings()])


class EvaluationError(Exception):
    pass


class Activation:
    """Facts converted to CEL values once, then shared by every expression evaluated on them."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data
        self._native = _ENV.Activation(dict(data))


class Expression:
    def __init__(self, source: str) -> None:
        self.source = source
        try:
            self._program = _ENV.compile(source)
        except RuntimeError as exc:
            raise RuleError("", _first_error_line(str(exc))) from exc

    def evaluate(self, activation: Activation) -> Any:
        result = self._program.eval(activation._native)
        if result.type().name() == "ERROR":
            raise EvaluationError(str(result.value()))
        return result.plain_value()


def _first_error_line(message: str) -> str:
    """cel-cpp prefixes `INVALID_ARGUMENT: ERROR: <input>:1:14:` and draws a caret below."""
    first = message.splitlines()[0]
    for prefix in ("INVALID_ARGUMENT: ", "ERROR: "):
        first = first.removeprefix(prefix)
    first = first.replace(" (in container '')", "")
    return "CEL " + first.replace("<input>:", "at ")
