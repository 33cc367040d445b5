"""The baselines ("loop", "compile", "sequential") against the float64 reference.

One table of op cases (``OP_CASES``) is crossed with layouts and float dtypes; the reference
(:mod:`kernels.reference`, on the upcast time-major inputs) decides. ``torch.compile`` on the CPU
is slow to compile (seconds per graph), so the compiled backend is checked once per estimator
(layouts and dtypes spread over the table), while the same log-step scan runs eagerly
(``compiled.EAGER``) over the whole table. The sequential backend runs the Triton kernels, under
the interpreter on a machine without CUDA.
"""

from __future__ import annotations

import math
import warnings
import zlib

import pytest
import torch

import kernels
from kernels import reference as R
from kernels.baselines import compiled, loop, pairs, sequential

from conftest import DEVICE, OPS, call, make_inputs, rel_err, sampled, to_1d, to_time_dim1, upcast

TOL = {torch.float32: 1e-5, torch.float64: 1e-12}

# (op, make_inputs keyword overrides): every estimator, optional inputs on and off
OP_CASES = [
    ("gae", dict()),
    ("gae", dict(next_values=True, truncated=False)),
    ("vtrace", dict(scalars=dict(lam=0.9, rho_bar=1.5, c_bar=0.8, pg_rho_bar=1e6))),
    ("vtrace", dict(next_values=True)),
    ("retrace", dict(scalars=dict(lam=0.9, c_bar=1.2))),
    ("lambda_returns", dict()),
    ("discounted_returns", dict()),
    ("discounted_returns", dict(truncated=False, bootstrap=False)),
    ("eligibility_traces", dict(initial=True)),
    ("episodic_prefix_sum", dict(initial=True)),
    ("episodic_prefix_sum", dict(scalars=dict(boundary="starts_at"))),
    ("linear_scan", dict(initial=True)),
    ("linear_scan", dict(initial=True, scalars=dict(reverse=True))),
]
DTYPES = [torch.float32, torch.float64]


def case_id(c):
    op, kw = c
    extra = [f"{k}={v}" for k, v in kw.get("scalars", {}).items()]
    extra += [f"{k}={v}" for k, v in kw.items() if k != "scalars"]
    return "-".join([op] + extra)


def seed_of(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def check(module, op_case, T, N, time_dim, dtype, density=0.08):
    op, kw = op_case
    tm = make_inputs(op, T, N, seed=seed_of(op_case, T, N, time_dim, str(dtype)), dtype=dtype,
                     density=density, **kw)
    ref = call(R, upcast(tm))
    case = to_time_dim1(tm) if time_dim == 1 else tm
    before = [t.clone() for t in case.tensors()]
    out = call(module, case, time_dim=time_dim)
    for b, a in zip(before, case.tensors()):
        assert torch.equal(b, a), "an input was modified"
    assert len(out) == len(ref)
    for i, (o, r) in enumerate(zip(out, ref)):
        r = r.t() if time_dim == 1 else r
        assert o.dtype == dtype and o.shape == r.shape and o.device.type == torch.device(DEVICE).type
        err = rel_err(o, r)
        assert err < TOL[dtype], f"output {i}: rel err {err:.2e}"
    return out


def test_op_table_covers_every_estimator():
    assert {op for op, _ in OP_CASES} == set(OPS) == set(pairs.BUILDERS)


# --------------------------------------------------------------------------- #
# loop and the (eager) log-step scan: the whole table
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize(*sampled(("op_case", OP_CASES, case_id), ("backend", ["loop", "logstep-eager"]),
                                  ("T,N", [(1, 3), (37, 5), (130, 17)], lambda s: f"T{s[0]}-N{s[1]}"),
                                  ("time_dim", [0, 1]), ("dtype", DTYPES), pairs=True))
def test_vectorized_baselines(backend, op_case, T, N, time_dim, dtype):
    module = loop if backend == "loop" else compiled.EAGER
    check(module, op_case, T, N, time_dim, dtype, density=0.15)


@pytest.mark.parametrize("op_case", OP_CASES, ids=case_id)
@pytest.mark.parametrize("backend", ["loop", "logstep-eager"])
def test_vectorized_one_env_and_empty(backend, op_case):
    module = loop if backend == "loop" else compiled.EAGER
    op, kw = op_case
    tm = make_inputs(op, 40, 3, seed=seed_of(op_case, "1d"), **kw)
    one = to_1d(tm, col=1)
    ref = call(R, upcast(one))
    out = call(module, one)
    for o, r in zip(out, ref):
        assert o.shape == (40,) and rel_err(o, r) < 1e-5
    empty = make_inputs(op, 0, 4, seed=1, **kw)
    for o in call(module, empty):
        assert o.shape == (0, 4) and o.dtype == torch.float32


def test_bf16_inputs_compute_in_float32():
    tm = make_inputs("gae", 64, 8, seed=3, dtype=torch.bfloat16)
    ref = call(R, upcast(tm))
    for module in (loop, compiled.EAGER):
        out = call(module, tm)
        for o, r in zip(out, ref):
            assert o.dtype == torch.bfloat16 and rel_err(o, r) < 1e-2


# --------------------------------------------------------------------------- #
# torch.compile: one graph per estimator (layouts and dtypes spread over the table)
# --------------------------------------------------------------------------- #
COMPILE_CASES = [
    (("gae", dict()), 8, 16, 0, torch.float32),  # the shape of test_bench's compile cell
    (OP_CASES[2], 33, 6, 1, torch.float32),  # vtrace, [N, T]
    (OP_CASES[4], 20, 5, 0, torch.float64),  # retrace, float64
    (OP_CASES[5], 17, 4, 1, torch.float32),
    (OP_CASES[6], 19, 3, 0, torch.float32),
    (OP_CASES[8], 21, 5, 0, torch.float64),
    (OP_CASES[10], 18, 4, 1, torch.float32),
    (OP_CASES[12], 23, 3, 0, torch.float32),
]


@pytest.mark.parametrize("op_case,T,N,time_dim,dtype", COMPILE_CASES,
                         ids=[f"{case_id(c[0])}-T{c[1]}-N{c[2]}-td{c[3]}-{c[4]}" for c in COMPILE_CASES])
def test_compiled(op_case, T, N, time_dim, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no silent fallback to eager here
        check(compiled, op_case, T, N, time_dim, dtype)
    assert compiled.is_compiled()


def test_compile_failure_falls_back_to_eager_once(monkeypatch):
    def broken(*args):
        raise RuntimeError("no compiler")

    monkeypatch.setitem(compiled._state, "fn", broken)
    monkeypatch.setitem(compiled._state, "eager", False)
    tm = make_inputs("lambda_returns", 12, 3, seed=5)
    with pytest.warns(RuntimeWarning, match="torch.compile failed"):
        out = call(compiled, tm)
    assert rel_err(out[0], call(R, upcast(tm))[0]) < 1e-5
    assert not compiled.is_compiled()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        call(compiled, tm)  # eager from now on, no second warning


# --------------------------------------------------------------------------- #
# sequential: the Triton kernels with block_t=1
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize(*sampled(("op_case", OP_CASES, case_id), ("time_dim", [0, 1]), ("dtype", DTYPES)))
def test_sequential(op_case, time_dim, dtype):
    check(sequential, op_case, 19, 37, time_dim, dtype, density=0.15)


def test_sequential_runs_one_lane_per_environment():
    for N in (16, 4096, 10**6):
        c = sequential.sequential_config(N, 132)
        assert c.block_t == 1 and c.block_n == 32 * c.num_warps and not c.lookback
    tm = make_inputs("gae", 5, 3, seed=2)
    with pytest.raises(ValueError, match="block_t=1"):
        call(sequential, tm, config=kernels.LaunchConfig(4, 32))
    out = call(sequential, tm, config=kernels.LaunchConfig(1, 16, 1))
    assert rel_err(out[0], call(R, upcast(tm))[0]) < 1e-5


def test_sequential_needs_triton(monkeypatch):
    monkeypatch.setattr(sequential, "runs_triton", lambda device: False)
    with pytest.raises(RuntimeError, match="CUDA"):
        call(sequential, make_inputs("gae", 5, 3, seed=2))


# --------------------------------------------------------------------------- #
# get_backend and validation parity with the public API
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("name", kernels.BACKENDS)
def test_get_backend(name):
    ns = kernels.get_backend(name)
    assert ns.name == name
    for op in OPS:
        assert callable(getattr(ns, op))
    if name != "compile":  # compiled functions are covered above
        for op in ("gae", "episodic_prefix_sum"):
            tm = make_inputs(op, 9, 4, seed=7)
            for o, r in zip(call(ns, tm), call(R, upcast(tm))):
                assert rel_err(o, r) < 1e-5


def test_get_backend_unknown():
    with pytest.raises(ValueError, match="unknown"):
        kernels.get_backend("cuda-magic")


@pytest.mark.parametrize("interpret", [False, True])
def test_trainer_backend_resolves_auto_and_names_what_runs(monkeypatch, interpret):
    """``auto`` is the fused API, but the loop on the CPU under the interpreter; the fused API on the
    CPU without the interpreter says that its float64 reference runs."""
    from kernels import _triton

    monkeypatch.setattr(_triton, "INTERPRET", interpret)
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    chosen = kernels.trainer_backend("auto", cpu)
    assert (chosen.name, chosen.label) == (("loop", "loop") if interpret
                                           else ("triton", "triton (float64 reference on cpu)"))
    assert chosen.gae is kernels.get_backend(chosen.name).gae
    assert kernels.trainer_backend("triton", cpu).label == ("triton" if interpret else
                                                            "triton (float64 reference on cpu)")
    assert (kernels.trainer_backend("auto", cuda).label, kernels.trainer_backend("compile", cpu).label) == (
        "triton", "compile")
    with pytest.raises(ValueError, match="unknown"):
        kernels.trainer_backend("cuda-magic", cpu)


BAD_CALLS = [
    ("gae", dict(gamma=1.5), ValueError),
    ("gae", dict(lam=float("nan")), ValueError),
    ("gae", dict(gamma=True), TypeError),
    ("gae", dict(time_dim=2), ValueError),
    ("vtrace", dict(rho_bar=-1.0), ValueError),
    ("episodic_prefix_sum", dict(boundary="middle"), ValueError),
    ("linear_scan", dict(reverse=1), TypeError),
]


@pytest.mark.parametrize("backend", [loop, compiled, compiled.EAGER], ids=["loop", "compile", "eager"])
@pytest.mark.parametrize("op,bad,exc", BAD_CALLS, ids=[f"{o}-{list(b)[0]}" for o, b, _ in BAD_CALLS])
def test_validation_like_public_api(backend, op, bad, exc):
    tm = make_inputs(op, 6, 3, seed=11)
    with pytest.raises(exc):
        call(kernels, tm, **bad)
    with pytest.raises(exc):
        call(backend, tm, **bad)


@pytest.mark.parametrize("backend", [loop, compiled], ids=["loop", "compile"])
def test_validation_missing_and_mismatched(backend):
    r = torch.randn(5, 3)
    term = torch.zeros(5, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="next_values"):
        backend.discounted_returns(r, term, truncated=term)
    with pytest.raises(ValueError, match="bootstrap_value"):
        backend.gae(r, r, term, None)
    with pytest.raises(ValueError, match="shape"):
        backend.gae(r, torch.randn(5, 4), term, torch.zeros(3))
    with pytest.raises(TypeError):
        backend.gae(r.to(torch.int32), r, term, torch.zeros(3))
