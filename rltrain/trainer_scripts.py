"""The trainers as programs: ``scripts/ppo.py`` and ``scripts/impala.py``.

The tools that run a trainer in their own process or read its flags (the hyperparameter search, the
time-to-score table's short command lines, the speedup study, the update benchmark) load it with
:func:`load_trainer`, by path, as the module ``<name>_script``: once per process, registered in
``sys.modules`` (where dataclasses and tyro look its ``Args`` up). The tests' ``load_script`` gives the
same module. No script imports another; this is the one place a trainer program is loaded.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TRAINERS = ("ppo", "impala")
SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_trainer(name: str) -> ModuleType:
    """``scripts/<name>.py`` (``name`` one of :data:`TRAINERS`) as the module ``<name>_script``."""
    if name not in TRAINERS:
        raise ValueError(f"unknown trainer {name!r}; choose one of {TRAINERS}")
    module_name = f"{name}_script"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
    return sys.modules[module_name]
