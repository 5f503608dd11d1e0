"""What PromQL expressions use, checked against what gangsched documents.

``documented_metrics`` reads the metric tables of docs/OBSERVABILITY.md
(name, type, labels); ``references`` lists the metric selectors of an
expression (already parsed by promtool, so a lexer is enough) with the
label names each one matches on, plus the labels of its by/without
clauses. A histogram is used through its _bucket, _sum and _count series;
``le`` exists on _bucket only.
"""

from __future__ import annotations

import dataclasses
import re

# Labels Prometheus puts on every scraped series (target labels of a
# prometheus-operator ServiceMonitor).
TARGET_LABELS = frozenset({"job", "namespace", "instance", "pod", "service",
                           "container", "endpoint"})

# Operators and aggregations: never metric names (an aggregation may come
# before its by-clause, so it is not always followed by "(").
_KEYWORDS = frozenset({"and", "or", "unless", "by", "without", "on",
                       "ignoring", "group_left", "group_right", "bool",
                       "offset", "inf", "nan", "atan2", "sum", "min", "max",
                       "avg", "group", "stddev", "stdvar", "count",
                       "count_values", "bottomk", "topk", "quantile"})
_TOKEN = re.compile(r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<range>\[[^\]]*\])
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<brace>[{}])
  | (?P<paren>[()])
  | (?P<other>\S)
""", re.VERBOSE)


@dataclasses.dataclass
class Metric:
    name: str
    type: str           # gauge, counter, histogram; "" when the table omits it
    labels: frozenset[str]


def documented_metrics(markdown: str) -> dict[str, Metric]:
    """Every metric of the tables, by name. The server's table has columns
    name | type | labels | meaning, labels in backticks; the shim's lists
    `name{labels}` (or two names a / b) in its first column."""
    metrics: dict[str, Metric] = {}
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2:
            continue
        names = re.findall(r"`([a-z_][a-z0-9_]*)(?:\{([^}]*)\})?`", cells[0])
        if not names or not all(n.startswith("gangsched_") for n, _ in names):
            continue
        if len(cells) >= 4 and cells[1] in ("gauge", "counter", "histogram"):
            # Label names; the values some rows list in parentheses are not.
            labels = frozenset(re.findall(
                r"`([a-z_]+)`", re.sub(r"\([^)]*\)", "", cells[2])))
            kind = cells[1]
        else:
            labels = frozenset(
                label.strip() for _, ls in names for label in ls.split(",")
                if label.strip())
            kind = "histogram" if "histogram" in cells[1] else ""
        for name, _ in names:
            metrics[name] = Metric(name, kind, labels)
    return metrics


@dataclasses.dataclass
class Reference:
    metric: str
    labels: list[str]   # matched in its {...}


def references(expr: str) -> tuple[list[Reference], list[str]]:
    """The metric selectors of `expr` and the labels of its by(...) /
    without(...) clauses."""
    tokens = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(expr)]
    refs: list[Reference] = []
    grouping: list[str] = []
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else (None, "")
        if kind == "ident" and text in ("by", "without", "on", "ignoring",
                                        "group_left", "group_right"):
            if nxt[1] == "(":
                j = i + 2
                while j < len(tokens) and tokens[j][1] != ")":
                    if tokens[j][0] == "ident":
                        grouping.append(tokens[j][1])
                    j += 1
                i = j + 1
                continue
        if kind == "ident" and text not in _KEYWORDS and nxt[1] != "(":
            labels: list[str] = []
            j = i + 1
            if nxt[1] == "{":
                j = i + 2
                while j < len(tokens) and tokens[j][1] != "}":
                    if tokens[j][0] == "ident":
                        labels.append(tokens[j][1])
                    j += 1
                j += 1
            refs.append(Reference(text, labels))
            i = j
            continue
        i += 1
    return refs, grouping


def check_expr(expr: str, documented: dict[str, Metric]) -> list[str]:
    """Problems with the metrics and labels `expr` uses."""
    problems = []
    refs, grouping = references(expr)
    if not refs:
        problems.append(f"{expr!r}: uses no metric")
    available: set[str] = set(TARGET_LABELS)
    for ref in refs:
        metric, suffix = _resolve(ref.metric, documented)
        if metric is None:
            problems.append(f"{ref.metric}: not in docs/OBSERVABILITY.md")
            continue
        labels = set(metric.labels) | TARGET_LABELS
        if suffix == "_bucket":
            labels.add("le")
        available |= labels
        for label in ref.labels:
            if label not in labels:
                problems.append(f"{ref.metric}{{{label}}}: {metric.name} "
                                f"has no label {label!r}")
    for label in grouping:
        if label not in available:
            problems.append(f"by/without ({label}): no metric of "
                            f"{expr!r} has it")
    return problems


def _resolve(series: str, documented: dict[str, Metric]
             ) -> tuple[Metric | None, str]:
    if series in documented and documented[series].type != "histogram":
        return documented[series], ""
    for suffix in ("_bucket", "_sum", "_count"):
        base = series[:-len(suffix)]
        if series.endswith(suffix) and base in documented and \
                documented[base].type in ("histogram", ""):
            return documented[base], suffix
    return None, ""
