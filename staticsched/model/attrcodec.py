"""The one codec of micro-op attribute values: their types, their text form (every text
format), their JSON form, and the checks both readers apply.

Two levels of check, on purpose: :func:`value_ok` is a value's *type* (what a program file may
carry: the program readers accept any well-typed value and leave what it means to the
verifier, which must see a bad region to report it), and :func:`op_value` adds what an OpGraph
op needs on top (a region of at least one row and column from row and column 0 on, a string
that is one token), since an OpGraph is input the tool refuses when it is wrong.
"""

from __future__ import annotations

import math
from typing import Any

from staticsched._fields import is_int

#: attribute types a kind may declare; each has one text form (:func:`format_attr`)
ATTR_TYPES = ("int", "float", "bool", "str", "region")


def value_ok(t: str, v: Any) -> bool:
    """Whether ``v`` is a value of attribute type ``t`` (a program's attribute)."""
    if t == "int":
        return is_int(v)
    if t == "float":
        return (is_int(v) or isinstance(v, float)) and math.isfinite(v)
    if t == "bool":
        return isinstance(v, bool)
    if t == "str":
        return isinstance(v, str)
    if t == "region":
        try:
            (r0, r1), (c0, c1) = v
        except (TypeError, ValueError):
            return False
        return all(is_int(x) for x in (r0, r1, c0, c1))
    return False


def op_value(t: str, v: Any) -> tuple[bool, Any]:
    """``(ok, value)`` for an OpGraph op's JSON attribute of type ``t``: :func:`value_ok`, a
    region non-empty and from 0 on (converted to tuples), a string one non-empty token, a
    float converted to ``float``."""
    if not value_ok(t, v):
        return False, v
    if t == "region":
        (r0, r1), (c0, c1) = v
        return 0 <= r0 < r1 and 0 <= c0 < c1, ((r0, r1), (c0, c1))
    if t == "str":
        return v != "" and not any(c.isspace() for c in v), v
    if t == "float":
        return True, float(v)
    return True, v


def format_attr(kind_type: str, value: Any) -> str:
    """The one text form of an attribute value (used by every text format)."""
    if kind_type == "region":
        (r0, r1), (c0, c1) = value
        return f"{r0}:{r1},{c0}:{c1}"
    if kind_type == "bool":
        return "1" if value else "0"
    if kind_type == "float":
        return repr(float(value))
    return str(value)


def attr_to_json(kind_type: str, value: Any) -> Any:
    """The one JSON form of an attribute value (regions become nested lists)."""
    if kind_type == "region":
        return [list(value[0]), list(value[1])]
    return value


def parse_attr(kind_type: str, text: str) -> Any:
    """Inverse of :func:`format_attr`; raises ``ValueError`` on malformed text."""
    if kind_type == "region":
        rows, cols = text.split(",")
        r0, r1 = rows.split(":")
        c0, c1 = cols.split(":")
        return ((int(r0), int(r1)), (int(c0), int(c1)))
    if kind_type == "bool":
        if text not in ("0", "1"):
            raise ValueError(f"bool must be 0 or 1, got {text!r}")
        return text == "1"
    if kind_type == "float":
        return float(text)
    if kind_type == "int":
        return int(text)
    return text


def attr_from_json(t: str, value: Any) -> Any:
    """Inverse of :func:`attr_to_json`; raises ``ValueError`` on a wrongly typed value."""
    if t == "region":
        if not (
            isinstance(value, list)
            and len(value) == 2
            and all(isinstance(r, list) and len(r) == 2 and all(is_int(x) for x in r) for r in value)
        ):
            raise ValueError(f"region must be [[r0, r1], [c0, c1]], got {value!r}")
        return ((value[0][0], value[0][1]), (value[1][0], value[1][1]))
    if not value_ok(t, value):
        raise ValueError(f"must be {t}, got {value!r}")
    return float(value) if t == "float" else value
