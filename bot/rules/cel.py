"""The one place that imports the CEL runtime (cel-expr-python, Google's cel-cpp bindings).

Variables are declared dynamic: rule files address plain maps built from the facts, and
`gpubot rules lint` catches misspelt fields by evaluating every expression against
reference facts. Evaluation errors, those cel-cpp returns as values and those it raises
(the iteration budget), come back as `EvaluationError`, the one exception a caller
handles: a rule that fails on one subject must never stop the other rules or subjects.
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
        # cel-cpp converts values lazily: one it cannot hold (an integer past 64 bits) is an
        # error of the expression that reads it, not of the activation.
        self._native = _ENV.Activation(dict(data))


class Expression:
    def __init__(self, source: str) -> None:
        self.source = source
        try:
            self._program = _ENV.compile(source)
        except RuntimeError as exc:
            raise RuleError("", _first_error_line(str(exc))) from exc

    def evaluate(self, activation: Activation) -> Any:
        try:
            result = self._program.eval(activation._native)
            if result.type().name() == "ERROR":
                raise EvaluationError(str(result.value()))
            return result.plain_value()
        except (RuntimeError, TypeError, ValueError, OverflowError) as exc:
            # cel-cpp raises instead of returning an error value when it gives up on the
            # data (its iteration budget, about 10,000 comprehension steps per evaluation):
            # that is still this expression's failure on this subject, not the caller's.
            raise EvaluationError(_first_error_line(str(exc), "CEL evaluation: ")) from exc


def _first_error_line(message: str, label: str = "CEL ") -> str:
    """cel-cpp prefixes `INVALID_ARGUMENT: ERROR: <input>:1:14:` (or `INTERNAL: `) and
    draws a caret below."""
    first = (message.splitlines() or [""])[0]
    for prefix in ("INVALID_ARGUMENT: ", "INTERNAL: ", "ERROR: "):
        first = first.removeprefix(prefix)
    first = first.replace(" (in container '')", "").removesuffix(" [INTERNAL]")
    return label + first.replace("<input>:", "at ")
