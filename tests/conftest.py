"""Shared test setup for the credit-assignment kernels.

* On a machine without CUDA, Triton kernels run on the CPU through Triton's
  interpreter: ``TRITON_INTERPRET=1`` must be in the environment before
  anything decorates a ``@triton.jit`` function, i.e. before ``kernels`` is
  imported.  This file is imported by pytest before any test module.
* ``device`` fixture: ``"cuda"`` when available, else ``"cpu"``; the same
  suite runs on both.  ``fp32_cuda``: no TF32 on CUDA during a test (results compared across layouts).
* ``clock``: a scripted ``time.perf_counter`` (``clock.advance(seconds)``) for timer tests whose
  sums must be exact rather than at the scheduler's mercy.
* ``needs_mujoco``: skip where the installed EnvPool was built without its MuJoCo tasks.
* ``load_script``: import a trainer script (``scripts/<name>.py``) as a module.
* ``torchrun`` / ``torchrun_failures``: launch a script on CPU ranks (Gloo) and read the
  launcher's failure summary.
* Input generators (``make_inputs``) for every estimator of the public API
  and ``rel_err``.  Test modules import these functions with
  ``from conftest import ...`` (pytest puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available() and "TRITON_INTERPRET" not in os.environ:
    assert "kernels" not in sys.modules, "kernels imported before TRITON_INTERPRET was set"
    os.environ["TRITON_INTERPRET"] = "1"

import math  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any, Dict, List, Optional, Tuple  # noqa: E402

import pytest  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _envpool_has_mujoco() -> bool:
    try:
        import envpool
    except ImportError:
        return False
    return "Hopper-v4" in envpool.list_all_envs()


# EnvPool builds without the MuJoCo tasks exist (the package's MuJoCo part is optional to build).
needs_mujoco = pytest.mark.skipif(not _envpool_has_mujoco(), reason="this EnvPool build has no MuJoCo tasks")


def load_script(name: str):
    """``scripts/<name>.py`` as the module ``<name>_script``, executed once per test run and kept in
    ``sys.modules`` (where dataclasses and tyro look it up)."""
    if f"{name}_script" in sys.modules:
        return sys.modules[f"{name}_script"]
    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_script", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def torchrun_command(script: str, *args: str, nproc: int = 2, launcher: tuple = ()) -> list:
    """``python -m torch.distributed.run --standalone --nproc-per-node nproc [launcher...] script args``
    (``nproc`` 0: ``python script args``)."""
    import sys as _sys
    runner = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), *launcher] if nproc else []
    return [_sys.executable, *runner, script, *args]


def torchrun_env() -> dict:
    """This environment without a surrounding launch's variables, the checkout first on ``PYTHONPATH``,
    one OpenMP thread per rank (the ranks share the CPU)."""
    root = str(Path(__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARIABLES and not k.startswith("TORCHELASTIC")}
    env.update(PYTHONPATH=os.pathsep.join([root, env.get("PYTHONPATH", "")]), OMP_NUM_THREADS="1")
    return env


def torchrun(script: str, *args: str, nproc: int = 2, timeout: float = 120, launcher: tuple = ()):
    """Run :func:`torchrun_command` from the checkout's root; ``(CompletedProcess, wall seconds)``."""
    import subprocess
    import time

    t0 = time.perf_counter()
    done = subprocess.run(torchrun_command(script, *args, nproc=nproc, launcher=launcher), capture_output=True,
                          text=True, env=torchrun_env(), timeout=timeout, cwd=Path(__file__).resolve().parents[1])
    return done, time.perf_counter() - t0


def torchrun_failures(output: str) -> Dict[int, str]:
    """``{rank: its block of torchrun's failure summary}`` (the failures and the root cause)."""
    from rltrain.torchrun_jobs import failure_summary

    assert "FAILED" in output, output[-3000:]
    return failure_summary(output)


OPS = (
    "gae",
    "vtrace",
    "retrace",
    "lambda_returns",
    "discounted_returns",
    "eligibility_traces",
    "episodic_prefix_sum",
    "linear_scan",
)


@pytest.fixture(scope="module")
def device() -> str:
    return DEVICE


class ScriptedClock:
    """A ``time.perf_counter`` that moves only when told to."""

    def __init__(self, start: float = 100.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> ScriptedClock:
    scripted = ScriptedClock()
    monkeypatch.setattr("time.perf_counter", scripted)
    return scripted


@pytest.fixture
def fp32_cuda():
    """Full-fp32 CUDA convolutions and matrix products (no TF32) during the test, the settings as before after."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


# --------------------------------------------------------------------------- #
# the fast suite's sample of a product of test parameters
# --------------------------------------------------------------------------- #
EXHAUSTIVE = pytest.mark.exhaustive


def sampled(*axes, pairs: bool = False) -> tuple:
    """``parametrize`` arguments for the product of ``axes``, the combinations outside a sample marked
    ``exhaustive``: ``make test`` runs the sample, ``make test-full`` the rest.

    Each axis is ``(names, values)`` or ``(names, values, id_of_value)``: ``names`` one argument name
    or several joined by commas, whose values are then tuples. The sample takes every value of
    every axis at least once: its ``k``-th combination takes the ``k mod len``-th value of each
    axis, for ``k`` up to the longest axis. With ``pairs`` it takes every value of the first axis
    with every value of each other axis. Use::

        @pytest.mark.parametrize(*sampled(("op_case", OP_CASES, case_id), ("T", [1, 150])))
    """
    names = [axis[0] for axis in axes]
    values = [list(axis[1]) for axis in axes]
    ids = [axis[2] if len(axis) > 2 else str for axis in axes]
    if pairs:
        width = max(len(v) for v in values[1:])
        picked = {(i, *((i + j) % len(v) for v in values[1:])) for i in range(len(values[0])) for j in range(width)}
    else:
        picked = {tuple(k % len(v) for v in values) for k in range(max(len(v) for v in values))}
    params = []
    for index in itertools.product(*(range(len(v)) for v in values)):
        combination = [v[i] for v, i in zip(values, index)]
        flat = [x for name, value in zip(names, combination) for x in (value if "," in name else (value,))]
        params.append(pytest.param(*flat, id="-".join(name(value) for name, value in zip(ids, combination)),
                                   marks=() if index in picked else EXHAUSTIVE))
    return ",".join(names), params


# --------------------------------------------------------------------------- #
# error measure
# --------------------------------------------------------------------------- #
def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``||out - ref|| / max(||ref||, tiny)`` in float64; NaN/Inf in ``out`` -> inf.

    Shapes must match exactly (no broadcasting)."""
    assert tuple(out.shape) == tuple(ref.shape), (tuple(out.shape), tuple(ref.shape))
    o = out.detach().to(torch.float64).cpu()
    r = ref.detach().to(torch.float64).cpu()
    if o.numel() == 0:
        return 0.0
    if not torch.isfinite(o).all():
        return math.inf
    den = max(torch.linalg.vector_norm(r).item(), torch.finfo(torch.float64).tiny)
    return torch.linalg.vector_norm(o - r).item() / den


def as_tuple(x) -> Tuple[torch.Tensor, ...]:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


# --------------------------------------------------------------------------- #
# input generators
# --------------------------------------------------------------------------- #
def make_generator(seed: int) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(seed)


def randn(T: int, N: int, gen: torch.Generator, *, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(T, N, generator=gen, dtype=torch.float64) * scale


def make_flags(
    T: int, N: int, gen: torch.Generator, *, density: float = 0.08, both_density: float = 0.02
) -> Tuple[torch.Tensor, torch.Tensor]:
    """(terminated, truncated) bool ``[T, N]`` with ~``density`` each and about
    ``both_density`` of steps where both are set."""
    term = torch.rand(T, N, generator=gen) < density
    trunc = torch.rand(T, N, generator=gen) < density
    both = torch.rand(T, N, generator=gen) < both_density
    return term | both, trunc | both


def cast_flags(x: torch.Tensor, flag_dtype: torch.dtype) -> torch.Tensor:
    return x.to(flag_dtype)


@dataclass
class Case:
    """Positional and keyword arguments of one call, time-major ``[T, N]``."""

    op: str
    args: List[Any]
    kwargs: Dict[str, Any] = field(default_factory=dict)

    def tensors(self):
        yield from (a for a in self.args if isinstance(a, torch.Tensor))
        yield from (v for v in self.kwargs.values() if isinstance(v, torch.Tensor))

    def map(self, fn) -> "Case":
        """Apply ``fn(name_or_index, tensor)`` to every tensor argument."""
        args = [fn(i, a) if isinstance(a, torch.Tensor) else a for i, a in enumerate(self.args)]
        kwargs = {k: fn(k, v) if isinstance(v, torch.Tensor) else v for k, v in self.kwargs.items()}
        return Case(self.op, args, kwargs)


# Which positional slots / keywords hold float data vs flags vs [N] vectors.
SIGNATURES: Dict[str, Dict[str, Any]] = {
    "gae": dict(pos=("rewards", "values", "terminated", "bootstrap_value")),
    "vtrace": dict(pos=("rewards", "values", "log_rhos", "terminated", "bootstrap_value")),
    "retrace": dict(pos=("rewards", "q_taken", "expected_next_q", "log_rhos", "terminated")),
    "lambda_returns": dict(pos=("rewards", "next_values", "terminated")),
    "discounted_returns": dict(pos=("rewards", "terminated")),
    "eligibility_traces": dict(pos=("inputs", "dones")),
    "episodic_prefix_sum": dict(pos=("inputs", "dones")),
    "linear_scan": dict(pos=("alpha", "beta")),
}
FLAG_NAMES = {"terminated", "truncated", "dones"}
VECTOR_NAMES = {"bootstrap_value", "initial"}


def make_inputs(
    op: str,
    T: int,
    N: int,
    *,
    seed: int = 0,
    device: str = DEVICE,
    dtype: torch.dtype = torch.float32,
    flag_dtype: torch.dtype = torch.bool,
    density: float = 0.08,
    truncated: bool = True,
    next_values: bool = False,
    bootstrap: bool = True,
    initial: bool = False,
    scalars: Optional[Dict[str, Any]] = None,
) -> Case:
    """Random valid inputs for ``op`` (time-major ``[T, N]``).

    Float data is drawn in float64 then cast to ``dtype`` (so a reference run
    on the upcast inputs sees exactly the rounded values).  Rewards/values are
    standard normal, ``log_rhos`` is normal * 0.5, flags ~``density`` each.
    ``scalars`` are passed through as keywords (gamma, lam, boundary, ...).
    """
    g = make_generator(seed)
    f = lambda x: x.to(dtype).to(device)  # noqa: E731
    fl = lambda x: x.to(flag_dtype).to(device)  # noqa: E731
    vec = lambda: f(torch.randn(N, generator=g, dtype=torch.float64))  # noqa: E731
    term, trunc = make_flags(T, N, g, density=density)
    done = term | trunc
    kw: Dict[str, Any] = {}
    if op == "gae":
        args = [f(randn(T, N, g)), f(randn(T, N, g)), fl(term), vec()]
        if truncated:
            kw["truncated"] = fl(trunc)
        if next_values:
            kw["next_values"] = f(randn(T, N, g))
    elif op == "vtrace":
        args = [f(randn(T, N, g)), f(randn(T, N, g)), f(randn(T, N, g, scale=0.5)), fl(term), vec()]
        if truncated:
            kw["truncated"] = fl(trunc)
        if next_values:
            kw["next_values"] = f(randn(T, N, g))
    elif op == "retrace":
        args = [
            f(randn(T, N, g)),
            f(randn(T, N, g)),
            f(randn(T, N, g)),
            f(randn(T, N, g, scale=0.5)),
            fl(term),
        ]
        if truncated:
            kw["truncated"] = fl(trunc)
    elif op == "lambda_returns":
        args = [f(randn(T, N, g)), f(randn(T, N, g)), fl(term)]
        if truncated:
            kw["truncated"] = fl(trunc)
    elif op == "discounted_returns":
        args = [f(randn(T, N, g)), fl(term)]
        if truncated:
            kw["truncated"] = fl(trunc)
            next_values = True  # truncation needs the values to bootstrap from
        if next_values:
            kw["next_values"] = f(randn(T, N, g))
        if bootstrap:
            kw["bootstrap_value"] = vec()
    elif op in ("eligibility_traces", "episodic_prefix_sum"):
        args = [f(randn(T, N, g)), fl(done)]
        if initial:
            kw["initial"] = vec()
    elif op == "linear_scan":
        # |beta| <= 1 keeps long scans bounded; mixed signs, some exact 0 and 1.
        beta = torch.rand(T, N, generator=g, dtype=torch.float64) * 0.4 + 0.6
        sign = torch.where(torch.rand(T, N, generator=g) < 0.1, -1.0, 1.0).double()
        beta = beta * sign
        beta[torch.rand(T, N, generator=g) < 0.03] = 0.0
        beta[torch.rand(T, N, generator=g) < 0.03] = 1.0
        args = [f(randn(T, N, g)), f(beta)]
        if initial:
            kw["initial"] = vec()
    else:  # pragma: no cover
        raise KeyError(op)
    kw.update(scalars or {})
    return Case(op, args, kw)


def _arg_name(case: Case, key) -> str:
    return SIGNATURES[case.op]["pos"][key] if isinstance(key, int) else key


def to_time_dim1(case: Case, *, contiguous: bool = False) -> Case:
    """``[T, N]`` -> ``[N, T]`` (a transposed, non-contiguous view unless ``contiguous``)."""

    def fn(key, t):
        if _arg_name(case, key) in VECTOR_NAMES or t.dim() != 2:
            return t
        return t.t().contiguous() if contiguous else t.t()

    return case.map(fn)


def to_1d(case: Case, col: int = 0) -> Case:
    """One environment: ``[T, N]`` -> ``[T]``; ``[N]`` vectors -> 0-d."""

    def fn(key, t):
        return t[col] if _arg_name(case, key) in VECTOR_NAMES else t[:, col]

    return case.map(fn)


def upcast(case: Case) -> Case:
    """Float tensors -> float64 (flags untouched) for the reference."""
    return case.map(lambda k, t: t.to(torch.float64) if t.is_floating_point() else t)


def call(module, case: Case, **extra):
    """Call ``module.<op>`` on the case; returns a tuple of outputs."""
    return as_tuple(getattr(module, case.op)(*case.args, **case.kwargs, **extra))
