"""Kubernetes quantity strings <-> exact integers, the server's rules.

Byte-like resources (memory, ephemeral-storage, hugepages-*, */memory) are
held in bytes, every other resource in milli-units ("0.5" GPU is 500), with
a fraction of the unit rounded up as Kubernetes does. Exact: no floats.
See docs/SCHEDULING.md ("Resources").
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

INT64_MAX = 2**63 - 1

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9,
            "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(r"\+?([0-9]*\.?[0-9]*)([a-zA-Z]*|[eE][+-]?[0-9]{1,3})")
_NAME = re.compile(r"[A-Za-z0-9._/-]{1,253}")


def is_bytes(resource: str) -> bool:
    """Whether the resource is held in bytes (else in milli-units)."""
    return (resource in ("memory", "ephemeral-storage",
                         "nvidia.com/gpu-memory")
            or resource.startswith("hugepages-")
            or resource.endswith("/memory"))


def is_resource_name(name: str) -> bool:
    """The server's rule for resource names and label keys."""
    return _NAME.fullmatch(name) is not None


def parse_quantity(text: str, resource: str = "cpu") -> int:
    """Parses a non-negative quantity into the resource's integer scale.

    Raises ValueError naming what is wrong, as the server would.
    """
    if not isinstance(text, str):
        text = str(text)
    return _parse(text, is_bytes(resource))


@functools.lru_cache(maxsize=4096)
def _parse(text: str, in_bytes: bool) -> int:
    """The same few quantity strings come back all the time (every pod of a
    group, every node of a pool): parsed once each."""
    bad = f'"{text}" is not a valid quantity'
    if text == "":
        raise ValueError(f"{bad}: empty")
    if text.startswith("-"):
        raise ValueError(f"{bad}: must not be negative")
    m = _QUANTITY.fullmatch(text)
    if m is None or not any(c.isdigit() for c in m.group(1)) \
            or m.group(1).count(".") > 1:
        raise ValueError(f"{bad}: malformed")
    number = Fraction(m.group(1) if not m.group(1).endswith(".")
                      else m.group(1)[:-1] or "0")
    suffix = m.group(2)
    if suffix in _BINARY:
        value = number * (2 ** _BINARY[suffix])
    elif suffix in _DECIMAL:
        value = number * Fraction(10) ** _DECIMAL[suffix]
    elif suffix[:1] in ("e", "E"):
        value = number * Fraction(10) ** int(suffix[1:])
    else:
        raise ValueError(f"{bad}: unknown suffix")
    if not in_bytes:
        value *= 1000
    whole = -(-value.numerator // value.denominator)  # round up
    if whole > INT64_MAX:
        raise ValueError(f"{bad}: too large")
    return int(whole)


def _decimal_form(n: int) -> tuple[int, str]:
    """The largest power of 1000 dividing n exactly: (840, "G")."""
    k = 0
    while n != 0 and n % 1000 == 0 and k < 6:
        n //= 1000
        k += 1
    return n, ["", "k", "M", "G", "T", "P", "E"][k]


def format_quantity(amount: int, resource: str = "cpu") -> str:
    """Exact quantity string for an amount in the resource's scale, with
    the suffix Kubernetes' canonical form would choose: for bytes, the
    binary or decimal form with the fewer digits, binary on a tie ("840G",
    "16Gi", "1000Ki"); the server's FormatQuantity, same rule."""
    if not is_bytes(resource):
        if amount % 1000 != 0:
            return f"{amount}m"
        mantissa, suffix = _decimal_form(amount // 1000)
        return f"{mantissa}{suffix}"
    mantissa, suffix = _decimal_form(amount)
    if amount >= 1024 and amount % 1024 == 0:
        for binary, shift in sorted(_BINARY.items(), key=lambda kv: -kv[1]):
            if amount % (1 << shift) == 0:
                if len(str(amount >> shift)) <= len(str(mantissa)):
                    return f"{amount >> shift}{binary}"
                break
    return f"{mantissa}{suffix}"
