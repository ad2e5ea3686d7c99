"""Reason and problem codes are written once (two StrEnums); everything else refers to them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import streamembed
from streamembed.core.inputs.validation import PROBLEM_CODES, ProblemCode
from streamembed.ops.metrics import LABEL_VALUES
from streamembed.stream.records import REASONS, Reason

PACKAGE = Path(streamembed.__file__).parent
FORMATS = PACKAGE.parent / "docs" / "formats.md"  # the record formats page: the dead-letter paragraph
#: Where the codes are defined.
HOMES = {"stream/records.py", "core/inputs/validation.py"}
#: Literals that equal a code but are prose, not a code (file, value).
PROSE = {("cli/fit.py", "negative")}


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, nodes) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def test_no_module_restates_a_reason_as_a_string() -> None:
    values = {r.value for r in Reason}
    found = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in HOMES:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        docs = _docstrings(tree)
        found += [f"{rel}:{n.lineno} {n.value!r}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and n.value in values and id(n) not in docs
                  and (rel, n.value) not in PROSE]
    assert found == [], "use Reason / ProblemCode members instead of their strings: " + ", ".join(found)


def test_the_core_codes_are_reasons_by_reference() -> None:
    for code in ProblemCode:
        assert code == Reason[code.name] and code.value == Reason[code.name].value
    assert tuple(ProblemCode) == PROBLEM_CODES and tuple(Reason) == REASONS


def test_values_are_the_released_ones() -> None:
    """The dead letters' and the metric's values (changing one is a format change)."""
    assert [r.value for r in Reason] == [
        "missing_id", "bad_id", "wrong_length", "missing_vector", "non_finite", "negative", "non_numeric",
        "bad_block", "unknown_landmark_version", "landmark_mismatch", "undecodable", "unreadable_file",
        "out_of_range", "rejected", "embed_failed", "quarantined", "too_large", "bad_object", "metric_failed",
        "ambiguous_landmarks"]


def test_the_metric_labels_come_from_the_enum() -> None:
    assert LABEL_VALUES[("streamembed_records_failed_total", "reason")] == ", ".join(Reason)


@pytest.mark.parametrize("reason", list(Reason))
def test_the_formats_page_names_every_reason_in_the_dead_letter_format(reason: Reason) -> None:
    text = FORMATS.read_text()
    para = text[text.index("**Dead letters**"):]
    para = para[:para.index("\n\n")]
    assert re.search(rf"`{reason.value}`", para), f"the dead-letter paragraph (docs/formats.md) lacks {reason.value}"
