"""Every file in scripts/ is an entry point of its own: no script imports another, by an import statement
or by loading it from its path, and none puts scripts/ on ``sys.path``. The code scripts share lives in
packages (``rltrain.bench`` for the benchmarks); a trainer program that another tool runs in its own
process is loaded by ``rltrain.trainer_process.load_trainer``."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from conftest import load_script
from rltrain.trainer_process import TRAINERS, load_trainer

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))
SCRIPT_NAMES = {p.stem for p in SCRIPTS}
LOADERS = ("import_module", "spec_from_file_location", "__import__", "run_path", "run_module", "SourceFileLoader")
# what a script may put on sys.path: the repository root (to run from a plain checkout)
ROOT_ON_PATH = {"str(ROOT)", "str(Path(__file__).resolve().parents[1])"}


def script_imports(source: str) -> list[str]:
    """What a script's source takes from other scripts: the modules its import statements name that are
    scripts, the loaders it calls (by path or by name), and the ``sys.path`` entries other than the
    repository root it adds."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in SCRIPT_NAMES]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [node.module] if node.module.split(".")[0] in SCRIPT_NAMES else []
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in LOADERS:
                found.append(f"{name}(...)")
            elif name in ("insert", "append") and ast.unparse(node.func).startswith("sys.path."):
                entry = ast.unparse(node.args[-1])
                found += [] if entry in ROOT_ON_PATH else [f"sys.path entry {entry}"]
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ROOT" for t in node.targets):
            value = ast.unparse(node.value)
            found += [] if value == "Path(__file__).resolve().parents[1]" else [f"ROOT = {value}"]
    return found


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_no_script_imports_another(path):
    assert script_imports(path.read_text()) == []


def test_the_check_finds_each_way_of_importing_a_script():
    source = "\n".join([
        "import bench_kernels as B",
        "from results_tables import machine",
        "from pathlib import Path",
        "import sys",
        "sys.path.insert(0, str(Path(__file__).resolve().parent))",
        "spec = importlib.util.spec_from_file_location('x', 'scripts/ppo.py')",
        "module = importlib.import_module('ppo')",
    ])
    assert script_imports(source) == ["bench_kernels", "results_tables",
                                      "sys.path entry str(Path(__file__).resolve().parent)",
                                      "spec_from_file_location(...)", "import_module(...)"]
    assert script_imports("import sys\nimport kernels\nfrom rltrain.bench import tables\n") == []


def test_a_trainer_is_loaded_once_as_the_module_the_tests_load():
    for name in TRAINERS:
        module = load_trainer(name)
        assert module is load_trainer(name) is load_script(name) is sys.modules[f"{name}_script"]
        assert callable(module.main) and callable(module.cli)
    with pytest.raises(ValueError, match="unknown trainer 'bench_kernels'"):
        load_trainer("bench_kernels")
