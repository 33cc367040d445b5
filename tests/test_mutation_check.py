"""The mutation check's list stays applicable (``scripts/mutation_check.py``; the check itself runs on
demand, not here): every mutant's source text is in its file exactly once, its replacement changes it,
and the tests it names exist."""

import ast
from pathlib import Path

import pytest

from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
check = load_script("mutation_check")


def _test_functions(path: Path) -> set:
    return {node.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("mutant", check.MUTANTS, ids=lambda m: m.name)
def test_each_mutant_applies_once_and_names_existing_tests(mutant):
    source = (ROOT / mutant.path).read_text()
    mutated = check.mutate(source, mutant)  # MutantError unless found exactly once
    assert mutated != source
    compile(mutated, mutant.path, "exec")  # the mutant is a bug, not a syntax error
    assert mutant.tests
    for test in mutant.tests:
        path, _, name = test.partition("::")
        assert (ROOT / path).is_file(), test
        assert not name or name in _test_functions(ROOT / path), test


def test_mutant_names_are_unique_and_the_issue_bugs_are_listed():
    names = [m.name for m in check.MUTANTS]
    assert len(names) == len(set(names))
    assert {"ppo-clip-min", "ppo-gae-without-truncated", "impala-log-ratio-sign", "ppo-ignores-norm-adv",
            "checkpoint-optimizer-without-state", "phase-table-total-without-ca"} <= set(names)


def test_a_source_text_found_twice_or_never_is_an_error():
    mutant = check.Mutant("m", "f.py", "x = 1", "x = 2", ("tests/test_x.py",))
    assert check.mutate("x = 1\ny = 3\n", mutant) == "x = 2\ny = 3\n"
    for text in ("x = 1\nx = 1\n", "y = 3\n"):
        with pytest.raises(check.MutantError, match="must be once"):
            check.mutate(text, mutant)


def test_an_unknown_mutant_exits_2_with_one_line(capsys):
    assert check.main(["no-such-mutant"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown mutant(s) no-such-mutant") and err.count("\n") == 1
