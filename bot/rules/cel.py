"""The one place that imports the CEL runtime (cel-expr-python, Google's cel-cpp bindings).

Variables are declared dynamic: rule files address plain maps built from the facts, and
`gpubot rules lint` catches misspelt fields by evaluating every expression against
reference facts. Evaluation errors, those cel-cpp returns as values and those it raises
(the iteration budget), come back as `EvaluationError`, the one exception a caller
handles: a rule that fails on one subject must never stop the other rules or subjects.

Compiling is most of loading the rules, and most expressions (a rule's evidence, severity
overrides, proposals) are evaluated only where the rule fires: `gpubot diagnose` of a healthy
cluster reads about one expression in six. So an expression may be made `deferred`: compiled
when it is first evaluated. It then fails as it would have failed to load, with the same
`RuleError`, once: `NotCompiled.first` is true the first time only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cel_expr_python.cel as _cel
from cel_expr_python.ext.ext_strings import ExtStrings

from bot.errors import RuleError

VARIABLES = ("node", "alerts", "xids", "pool", "cluster", "settings", "findings", "variables")


def _sorted_keys(value: Mapping[Any, Any]) -> list[Any]:
    # Keys of one map may mix CEL's key types (int, uint, bool, string): by type, then value.
    return sorted(value, key=lambda key: (type(key).__name__, key))


SORTED_KEYS = "sortedKeys"
"""`m.sortedKeys()`: a map's keys in order. cel-cpp iterates a map (`m.map(k, ...)`,
`m.filter(k, ...)`) in its hash order, which changes from one process to the next: the same
diagnosis worded in another order by a restart or another replica. `gpubot rules lint`
refuses a map iterated without it."""

# The strings extension (join, split, upperAscii, ...) is the one Kubernetes enables too.
_ENV = _cel.NewEnv(
    variables={name: _cel.Type.DYN for name in VARIABLES},
    extensions=[ExtStrings()],
    functions=[
        _cel.FunctionDecl(
            SORTED_KEYS,
            [
                _cel.Overload(
                    "map_sorted_keys",
                    return_type=_cel.Type.List(_cel.Type.DYN),
                    parameters=[_cel.Type.Map(_cel.Type.DYN, _cel.Type.DYN)],
                    is_member=True,
                    impl=_sorted_keys,
                )
            ],
        )
    ],
)


class EvaluationError(Exception):
    pass


class NotCompiled(EvaluationError):
    """A deferred expression that is not CEL: `error` is what loading would have said."""

    def __init__(self, error: RuleError, first: bool) -> None:
        super().__init__(error.message)
        self.error = error
        self.first = first


class Activation:
    """Facts converted to CEL values once, then shared by every expression evaluated on them."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data
        # cel-cpp converts values lazily: one it cannot hold (an integer past 64 bits) is an
        # error of the expression that reads it, not of the activation.
        self._native = _ENV.Activation(dict(data))


class Expression:
    """A CEL expression; `where`, `field` and `rule_id` name it in its `RuleError` when it is
    not CEL ("rules/x.yaml:12: rule r: when: CEL at 1:5: ..."). Compiled when made, or with
    `deferred`, when first evaluated."""

    def __init__(
        self,
        source: str,
        *,
        deferred: bool = False,
        where: str = "",
        field: str = "",
        rule_id: str | None = None,
    ) -> None:
        self.source = source
        self._where, self._field, self._rule_id = where, field, rule_id
        self._program: Any = None
        self._error: RuleError | None = None
        if not deferred:
            self.compile()

    def compile(self) -> None:
        """Compile it if it is not yet; raises its `RuleError` when it is not CEL."""
        error = self._compiled()
        if error is not None:
            raise error

    def _compiled(self) -> RuleError | None:
        if self._program is None and self._error is None:
            try:
                self._program = _ENV.compile(self.source)
            except RuntimeError as exc:
                message = _first_error_line(str(exc))
                if self._field:
                    message = f"{self._field}: {message}"
                self._error = RuleError(self._where, message, self._rule_id)
        return self._error

    def evaluate(self, activation: Activation) -> Any:
        if self._program is None:
            told = self._error is not None
            error = self._compiled()
            if error is not None:
                raise NotCompiled(error, first=not told)
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
