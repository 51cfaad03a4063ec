"""The calculator does arithmetic exactly as Python does, and nothing else."""

from __future__ import annotations

import ast
import asyncio
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnstream.toolsets.calculator import MAX_EXPRESSION_CHARS, MAX_INT_BITS, CalculatorError, calculator, evaluate


def calc(expression: str) -> str:
    """Through the Tool, as the executor calls it (a coroutine: it runs on the event loop)."""
    assert calculator.fn is not None
    result = asyncio.run(calculator.fn(**calculator.validate({"expression": expression})))
    assert isinstance(result, str)
    return result


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2", "3"),
        ("2 * (3 + 4)", "14"),
        ("7 / 2", "3.5"),
        ("7 // 2", "3"),
        ("-7 // 2", "-4"),
        ("7 % 3", "1"),
        ("-7 % 3", "2"),
        ("2 ** 10", "1024"),
        ("2 ** -1", "0.5"),
        ("-2 ** 2", "-4"),
        ("2 ** 3 ** 2", "512"),
        ("+-+3", "-3"),
        ("0.1 + 0.2", "0.30000000000000004"),
        ("1_000 * 3", "3000"),
        ("2.5e3", "2500.0"),
        ("sqrt(16)", "4.0"),
        ("abs(-3.5)", "3.5"),
        ("round(2.675, 2)", "2.67"),
        ("round(7.5)", "8"),
        ("floor(-1.5) + ceil(1.2)", "0"),
        ("max(1, 5, 3) - min(4, 2)", "3"),
        ("log(8, 2)", "3.0"),
        ("hypot(3, 4)", "5.0"),
        ("pi", repr(math.pi)),
        ("2 * e", repr(2 * math.e)),
        ("2 ** 1000", str(2**1000)),
        ("  (1 + 2)  ", "3"),
    ],
)
def test_arithmetic(expression: str, expected: str) -> None:
    assert calc(expression) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("9**9**9**9", "exponent .* too large"),
        ("10**10**10", "exponent .* too large"),
        ("2**9999 * 2**9999", "too large"),
        ("99999**9999", "too large"),
        ("10.0 ** 400", "too large"),
        ("1e308 * 10", "not a finite number"),
        ("1e999", "not a finite number"),
        ("10**400 / 3", "too large"),
        ("sqrt(10**900)", "too large"),
        ("exp(1000)", "too large"),
        ("round(5, -10**18)", "exponent|round"),
        ("round(5, 1000)", "round"),
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("(-8) ** (1/3)", "not a real number"),
        ("sqrt(-1)", "math error"),
        ("log(0)", "math error"),
        ("().__class__", "not allowed"),
        ("(1).__class__", "not allowed"),
        ("__import__('os').system('true')", "can be called, by name"),
        ("open('/etc/passwd')", "not an allowed function"),
        ("lambda: 1", "not allowed"),
        ("[x for x in range(10)]", "not allowed"),
        ("(x := 3)", "not allowed"),
        ("'a' * 3", "only numbers"),
        ("b'a'", "only numbers"),
        ("True + 1", "only numbers"),
        ("1j * 1j", "only numbers"),
        ("None", "only numbers"),
        ("x + 1", "unknown name 'x'"),
        ("math.pi", "not allowed"),
        ("1 if 1 else 2", "not allowed"),
        ("1 < 2", "not allowed"),
        ("[1, 2]", "not allowed"),
        ("2 ^ 3", "use \\*\\*"),
        ("2 << 3", "shift"),
        ("~1", "not supported"),
        ("not 1", "not supported"),
        ("sqrt(x=4)", "positional"),
        ("max(*[1, 2])", "positional"),
        ("sqrt(1, 2)", "takes 1 argument"),
        ("max(1)", "takes 2 to 20 argument"),
        ("pi()", "not an allowed function"),
        ("(lambda: 1)()", "can be called, by name"),
        ("sqrt.__call__(4)", "can be called, by name"),
        ("1 +", "not a valid expression"),
        ("import os", "not a valid expression"),
        ("1; 2", "not a valid expression"),
        ("", "empty"),
        ("   ", "empty"),
        ("(" * 300 + "1" + ")" * 300, "too long|not a valid"),
        ("1+" * 300 + "1", "too long"),
    ],
)
def test_refused(expression: str, message: str) -> None:
    with pytest.raises(CalculatorError, match=message):
        calc(expression)


def test_calculator_error_is_a_value_error() -> None:
    # The executor reports tool exceptions as "TypeName: message"; the type should read well.
    assert issubclass(CalculatorError, ValueError)


def test_hostile_expressions_are_refused_before_they_compute() -> None:
    # The calculator runs on the event loop, so its work must stay bounded: what would build a
    # huge number is refused by the limits (checked before the power is taken), and what is
    # allowed stays within MAX_INT_BITS. (Bounds, not timings: speed belongs in benchmarks.)
    refused = {"9**9**9**9", "2**10000 * 2**10000", "99999**9999", "round(1, -10**10)"}
    for expression in [*refused, "-" * (MAX_EXPRESSION_CHARS - 1) + "1", "10**1000 // 7"]:
        try:
            value = evaluate(expression)
        except CalculatorError:
            assert expression in refused or expression.startswith("-"), expression
            continue
        assert expression not in refused
        assert not isinstance(value, int) or value.bit_length() <= MAX_INT_BITS


def test_schema() -> None:
    assert calculator.name == "calculator"
    assert calculator.input_schema["required"] == ["expression"]
    assert "**" in calculator.description


# --- random arithmetic, compared with Python's own evaluation of the same text ---------------

numbers = st.one_of(
    st.integers(min_value=0, max_value=1000).map(str),
    st.floats(min_value=0, max_value=1000, allow_nan=False, allow_infinity=False).map(repr),
)


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.tuples(children, st.sampled_from(["+", "-", "*", "/", "//", "%"]), children).map(
        lambda t: f"({t[0]} {t[1]} {t[2]})"
    )
    # Small literal exponents keep Python's reference evaluation cheap.
    power = st.tuples(children, st.integers(min_value=-3, max_value=3)).map(lambda t: f"({t[0]}) ** {t[1]}")
    unary = st.tuples(st.sampled_from(["-", "+"]), children).map(lambda t: f"{t[0]}{t[1]}")
    return st.one_of(binary, power, unary)


expressions = st.recursive(numbers, _extend, max_leaves=8)


def _passes_through_non_finite(expression: str) -> bool:
    """Whether some part of the expression is infinite, NaN or complex in Python. Python's floats
    overflow to inf without raising (``4 / 2.2e-308``), and ``inf ** 0`` is 1.0 again; the
    calculator refuses such a step, so the final value alone is not the oracle."""
    for node in ast.walk(ast.parse(expression, mode="eval").body):
        if not isinstance(node, ast.expr):
            continue  # an operator
        part = ast.fix_missing_locations(ast.Expression(node))
        try:
            value = eval(compile(part, "<part>", "eval"), {"__builtins__": {}}, {})
        except (ZeroDivisionError, OverflowError):
            return True
        if isinstance(value, complex) or (isinstance(value, float) and not math.isfinite(value)):
            return True
    return False


@settings(max_examples=400, deadline=None)
@given(expressions)
def test_matches_python(expression: str) -> None:
    try:
        expected = eval(expression, {"__builtins__": {}}, {})  # the test's trusted oracle
    except (ZeroDivisionError, OverflowError):
        with pytest.raises(CalculatorError):
            evaluate(expression)
        return
    if isinstance(expected, complex) or (isinstance(expected, float) and not math.isfinite(expected)) \
            or _passes_through_non_finite(expression):
        with pytest.raises(CalculatorError):
            evaluate(expression)
        return
    if _overflows_on_the_way(expression):
        # Python carries an infinity through (1e308 * 10 ** 0 ... ** 0 is 1.0 again); the
        # calculator refuses a non-finite value as soon as one appears.
        with pytest.raises(CalculatorError, match="not a finite number"):
            evaluate(expression)
        return
    actual = evaluate(expression)
    assert type(actual) is type(expected)
    assert actual == expected


def _overflows_on_the_way(expression: str) -> bool:
    """Whether some part of the expression is, for Python, an infinity or not a number."""
    for node in ast.walk(ast.parse(expression, mode="eval")):
        if isinstance(node, ast.BinOp | ast.UnaryOp):
            try:
                value = eval(compile(ast.Expression(node), "<part>", "eval"), {"__builtins__": {}}, {})
            except (ZeroDivisionError, OverflowError):
                continue
            if isinstance(value, float) and not math.isfinite(value):
                return True
    return False
