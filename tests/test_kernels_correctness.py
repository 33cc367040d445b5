"""Every public estimator (kernels.<op>) against the float64 reference.

Error measure (METHOD.md "Correct first"): ``||out - ref|| / ||ref||`` with the
reference computed in float64 on the *same* (rounded) inputs; NaN never passes.
Every test draws its own random inputs (seeded from the test id).

One generic table of op cases (``OP_CASES``) is crossed with shapes, layouts,
dtypes and flag dtypes; per-op scalar/optional-argument variants live in
``VARIANTS``. Where a test's product of parameters is large, ``make test`` runs a sample
that takes every value of every parameter (``conftest.sampled``) and ``make test-full``
the rest.
"""

from __future__ import annotations

import zlib

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kernels
from kernels import reference as R

from conftest import (
    DEVICE,
    EXHAUSTIVE,
    OPS,
    Case,
    call,
    make_inputs,
    rel_err,
    to_1d,
    to_time_dim1,
    upcast,
    FLAG_NAMES,
    VECTOR_NAMES,
    SIGNATURES,
    sampled,
)

TOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 1e-2}


def seed_of(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def assert_matches(case: Case, *, time_dim: int = 0, ref_case: Case | None = None, tol=None,
                   out_dtype=None, check_inputs_unchanged: bool = True):
    """Run the public op on ``case`` (in layout ``time_dim``) and compare with the
    reference on ``ref_case`` (time-major; defaults to ``case``)."""
    ref_case = case if ref_case is None else ref_case
    ref = call(R, upcast(ref_case))
    before = [t.clone() for t in case.tensors()]
    out = call(kernels, case, time_dim=time_dim)
    if check_inputs_unchanged:
        for b, a in zip(before, case.tensors()):
            same = torch.equal(b, a) or (
                b.is_floating_point() and torch.equal(b.nan_to_num(0.5), a.nan_to_num(0.5)))
            assert same, "an input was modified"
    assert len(out) == len(ref)
    first = next(t for t in case.args if isinstance(t, torch.Tensor) and t.is_floating_point())
    out_dtype = first.dtype if out_dtype is None else out_dtype
    tol = TOL[out_dtype] if tol is None else tol
    for i, (o, r) in enumerate(zip(out, ref)):
        assert o.dtype == out_dtype, (i, o.dtype, out_dtype)
        assert o.device.type == torch.device(DEVICE).type
        if time_dim == 1 and r.dim() == 2:
            r = r.t()
        assert o.shape == r.shape, (i, tuple(o.shape), tuple(r.shape))
        err = rel_err(o, r)
        assert err < tol, f"output {i}: rel err {err:.3e} >= {tol:.0e}"
    return out, ref


# --------------------------------------------------------------------------- #
# the generic table of op cases: (op, make_inputs keyword overrides)
# --------------------------------------------------------------------------- #
OP_CASES = [
    ("gae", dict()),
    ("gae", dict(next_values=True)),
    ("vtrace", dict()),  # pg_adv = vs - V (vtrace.pg_is_x)
    ("vtrace", dict(next_values=True, scalars=dict(lam=0.9))),
    ("vtrace", dict(scalars=dict(lam=0.9, pg_rho_bar=1.2))),  # pg_adv from x_{t+1}, successors from the values
    ("retrace", dict()),
    ("lambda_returns", dict()),
    ("discounted_returns", dict()),  # truncated + next_values + bootstrap_value
    ("discounted_returns", dict(truncated=False)),  # bootstrap_value only
    ("eligibility_traces", dict(initial=True)),
    ("episodic_prefix_sum", dict(initial=True)),
    ("episodic_prefix_sum", dict(initial=True, scalars=dict(boundary="starts_at"))),
    ("linear_scan", dict(initial=True)),
    ("linear_scan", dict(initial=True, scalars=dict(reverse=True))),
]


def case_id(c):
    op, kw = c
    extra = []
    for k, v in kw.items():
        if k == "scalars":
            extra += [f"{a}={b}" for a, b in v.items()]
        else:
            extra.append(f"{k}={v}")
    return "-".join([op] + extra)


def shape_id(shape) -> str:
    return f"T{shape[0]}-N{shape[1]}"


def config_id(config) -> str:
    return "x".join(map(str, config))


def dtype_id(dtype) -> str:
    return {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16", torch.float64: "f64"}[dtype]


# N not a multiple of 32/64; T = 128 is exactly one time chunk of the interpreter's tiling and
# T = 1000 several (with a partial last one). Not a full cross product: the interpreter is slow.
SHAPES_TN = [(1, 1), (1, 130), (2, 3), (2, 37), (7, 1), (7, 130), (128, 3), (128, 37),
             (128, 130), (1000, 67)]
# [N, T] given as a transposed (non-contiguous) view of the time-major data
SHAPES_NT = [(1, 37), (7, 3), (128, 130), (1000, 3)]
LAYOUT_SHAPES = [(0, T, N) for T, N in SHAPES_TN] + [(1, T, N) for T, N in SHAPES_NT]


def shape_params() -> list:
    """Every op case in every layout and shape; the sample gives each op case one shape of each
    layout, in turn, so every shape is in it too."""
    params = []
    for i, op_case in enumerate(OP_CASES):
        for time_dim, T, N in LAYOUT_SHAPES:
            shapes = SHAPES_TN if time_dim == 0 else SHAPES_NT
            in_sample = (T, N) == shapes[i % len(shapes)]
            params.append(pytest.param(op_case, time_dim, T, N, id=f"{case_id(op_case)}-td{time_dim}-T{T}-N{N}",
                                       marks=() if in_sample else EXHAUSTIVE))
    return params


@pytest.mark.parametrize("op_case,time_dim,T,N", shape_params())
def test_shapes_float32(op_case, T, N, time_dim):
    op, kw = op_case
    tm = make_inputs(op, T, N, seed=seed_of(op_case, T, N, time_dim), **kw)
    # time_dim=1: a transposed (non-contiguous) view of the time-major data
    case = to_time_dim1(tm) if time_dim == 1 else tm
    if time_dim == 1 and min(T, N) > 1:
        assert not case.args[0].is_contiguous()
    assert_matches(case, time_dim=time_dim, ref_case=tm)


@pytest.mark.parametrize("T,N", [(7, 37), (1000, 5)], ids=["T7-N37", "T1000-N5"])
@pytest.mark.parametrize("op_case", OP_CASES, ids=case_id)
def test_float64(op_case, T, N):
    op, kw = op_case
    tm = make_inputs(op, T, N, seed=seed_of(op_case, T, N, "f64"), dtype=torch.float64, **kw)
    assert_matches(tm)


# --------------------------------------------------------------------------- #
# layouts and strides
# --------------------------------------------------------------------------- #
def _padded_view(t: torch.Tensor, transpose: bool) -> torch.Tensor:
    """A strided, offset view of ``t`` ([T, N]) inside a garbage-filled buffer:
    time stride 2 (or 3 when transposed) and an offset. Every element around the
    view, including its row T and column N, holds NaN (float) / 1 (flags), so a
    read outside the view (or a masked-off load that is not masked) shows up."""
    T, N = t.shape
    fill = float("nan") if t.is_floating_point() else 1
    if not transpose:
        big = torch.full((2 * T + 3, N + 4), fill, dtype=t.dtype, device=t.device)
        view = big[1:2 * T + 1:2, 2:N + 2]
        view.copy_(t)
        return view
    big = torch.full((N + 3, 3 * T + 5), fill, dtype=t.dtype, device=t.device)
    view = big[1:N + 1, 2:3 * T + 2:3]  # [N, T] with time stride 3
    view.copy_(t.t())
    return view


@pytest.mark.parametrize("layout", ["sliced_tm", "sliced_nt", "vectors_strided", "expanded"])
@pytest.mark.parametrize("op_case", OP_CASES, ids=case_id)
def test_strided_views(op_case, layout):
    op, kw = op_case
    T, N = 70, 19
    tm = make_inputs(op, T, N, seed=seed_of(op_case, layout), **kw)
    sig = SIGNATURES[op]["pos"]
    name = lambda k: sig[k] if isinstance(k, int) else k  # noqa: E731
    time_dim = 0
    if layout == "sliced_tm":
        case = tm.map(lambda k, t: t if name(k) in VECTOR_NAMES else _padded_view(t, False))
    elif layout == "sliced_nt":
        time_dim = 1
        case = tm.map(lambda k, t: t if name(k) in VECTOR_NAMES else _padded_view(t, True))
    elif layout == "vectors_strided":  # [N] vectors as a strided view into a NaN buffer
        def vec_view(k, t):
            if name(k) not in VECTOR_NAMES:
                return t
            big = torch.full((2 * N + 1,), float("nan"), dtype=t.dtype, device=t.device)
            big[:-1:2] = t
            return big[:-1:2]
        case = tm.map(vec_view)
    else:  # stride-0 (broadcast) inputs: every series and vector expanded from one environment
        case = tm.map(lambda k, t: t[:1].expand(N) if name(k) in VECTOR_NAMES
                      else t[:, :1].expand(T, N))
        tm = case
    if layout.startswith("sliced"):
        assert not any(t.is_contiguous() for t in case.tensors() if t.dim() == 2)
    assert_matches(case, time_dim=time_dim, ref_case=tm)


@pytest.mark.parametrize("T", [1, 150])
@pytest.mark.parametrize("op_case", OP_CASES, ids=case_id)
def test_one_environment_1d(op_case, T):
    op, kw = op_case
    tm = make_inputs(op, T, 4, seed=seed_of(op_case, T, "1d"), **kw)
    case = to_1d(tm, col=2)
    out, _ = assert_matches(case)
    for o in out:
        assert o.shape == (T,)


# --------------------------------------------------------------------------- #
# flags and float dtypes
# --------------------------------------------------------------------------- #
FLAG_OPS = [c for c in OP_CASES if c[0] != "linear_scan"]


@pytest.mark.parametrize("flag_dtype", [torch.uint8, torch.int32, torch.float32], ids=str)
@pytest.mark.parametrize("op_case", FLAG_OPS, ids=case_id)
def test_flag_dtypes(op_case, flag_dtype):
    # flags are read as x != 0: use nonzero values other than 1 too
    op, kw = op_case
    tm = make_inputs(op, 64, 37, seed=seed_of(op_case, str(flag_dtype)), flag_dtype=flag_dtype,
                     density=0.2, **kw)
    values = {torch.uint8: [1, 2, 255], torch.int32: [1, -1, 7], torch.float32: [1.0, 0.5, -2.0]}
    g = torch.Generator().manual_seed(1)

    def scramble(k, t):
        if not _is_flag(tm, k):
            return t
        v = torch.tensor(values[flag_dtype], dtype=flag_dtype)
        pick = v[torch.randint(0, 3, t.shape, generator=g)].to(t.device)
        return torch.where(t != 0, pick, torch.zeros_like(pick))

    tm = tm.map(scramble)
    out, _ = assert_matches(tm)
    # the same flags given as bool give bit-identical results
    as_bool = tm.map(lambda k, t: (t != 0) if _is_flag(tm, k) else t)
    out_b = call(kernels, as_bool)
    for a, b in zip(out, out_b):
        assert torch.equal(a, b)


def _is_flag(case, key):
    name = SIGNATURES[case.op]["pos"][key] if isinstance(key, int) else key
    return name in FLAG_NAMES


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("op_case", OP_CASES, ids=case_id)
def test_low_precision(op_case, dtype):
    op, kw = op_case
    # the reference runs on the same rounded inputs (make_inputs casts before returning)
    tm = make_inputs(op, 150, 37, seed=seed_of(op_case, str(dtype)), dtype=dtype, **kw)
    assert_matches(tm)


@pytest.mark.parametrize("first,rest", [(torch.bfloat16, torch.float32),
                                        (torch.float16, torch.float64)], ids=str)
@pytest.mark.parametrize("op_case", OP_CASES, ids=case_id)
def test_output_dtype_is_first_float_input(op_case, first, rest):
    op, kw = op_case
    tm = make_inputs(op, 40, 9, seed=seed_of(op_case, str(first), str(rest)), dtype=rest, **kw)
    tm.args[0] = tm.args[0].to(first)
    tol = max(TOL[first], TOL[rest])
    assert_matches(tm, out_dtype=first, tol=tol)


# --------------------------------------------------------------------------- #
# optional arguments and scalars
# --------------------------------------------------------------------------- #
VARIANTS = {
    "gae": [
        dict(truncated=False),
        dict(truncated=False, next_values=True),
        dict(next_values=True, scalars=dict(gamma=0.0)),
        dict(scalars=dict(lam=0.0)),
        dict(scalars=dict(gamma=1.0, lam=1.0)),
        dict(scalars=dict(gamma=0.9, lam=0.5)),
        dict(density=0.0),
        dict(density=0.5),
    ],
    "vtrace": [
        dict(truncated=False),
        dict(next_values=True, truncated=False),
        dict(scalars=dict(lam=0.0)),
        dict(scalars=dict(lam=0.9, gamma=1.0)),
        dict(scalars=dict(gamma=0.0)),
        dict(scalars=dict(rho_bar=0.5, c_bar=2.0, pg_rho_bar=0.3)),
        dict(scalars=dict(rho_bar=10.0, c_bar=10.0, pg_rho_bar=10.0)),
        dict(scalars=dict(rho_bar=0.0, c_bar=0.0, pg_rho_bar=0.0)),
        dict(next_values=True, density=0.5, scalars=dict(lam=0.7, c_bar=0.8)),
    ],
    "retrace": [
        dict(truncated=False),
        dict(scalars=dict(lam=0.7, c_bar=0.5)),
        dict(scalars=dict(lam=0.0)),
        dict(scalars=dict(gamma=0.0)),
        dict(scalars=dict(gamma=1.0, c_bar=3.0)),
        dict(density=0.5),
    ],
    "lambda_returns": [
        dict(truncated=False),
        dict(scalars=dict(lam=0.0)),
        dict(scalars=dict(lam=1.0)),
        dict(scalars=dict(gamma=0.0)),
        dict(scalars=dict(gamma=1.0, lam=1.0)),
        dict(density=0.5),
    ],
    "discounted_returns": [
        dict(truncated=False, bootstrap=False),  # G_T = 0
        dict(truncated=False, next_values=True, bootstrap=False),  # G_T = next_values[T-1]
        dict(truncated=True, bootstrap=False),  # truncation bootstrap from next_values
        dict(truncated=False, next_values=True),  # both given, bootstrap_value wins at T
        dict(scalars=dict(gamma=0.0)),
        dict(scalars=dict(gamma=1.0)),
    ],
    "eligibility_traces": [
        dict(),
        dict(initial=True, scalars=dict(gamma=1.0, lam=1.0)),
        dict(scalars=dict(lam=0.0)),
        dict(initial=True, scalars=dict(gamma=0.5, lam=0.9)),
        dict(initial=True, density=0.0),
    ],
    "episodic_prefix_sum": [
        dict(),
        dict(scalars=dict(boundary="starts_at")),
        dict(initial=True, density=0.5, scalars=dict(boundary="ends_at")),
        dict(initial=True, density=0.0, scalars=dict(boundary="starts_at")),
    ],
    "linear_scan": [
        dict(),
        dict(scalars=dict(reverse=True)),
        dict(scalars=dict(reverse=False)),
        dict(initial=True, scalars=dict(reverse=False)),
    ],
}
VARIANT_CASES = [(op, v) for op in OPS for v in VARIANTS[op]]


@pytest.mark.parametrize("dtype", [torch.float64], ids=str)
@pytest.mark.parametrize("op_case", VARIANT_CASES, ids=case_id)
def test_variants(op_case, dtype):
    op, kw = op_case
    tm = make_inputs(op, 150, 37, seed=seed_of(op_case, str(dtype)), dtype=dtype, **kw)
    assert_matches(tm)


@pytest.mark.parametrize("op_case", OP_CASES, ids=case_id)
def test_empty_time(op_case):
    op, kw = op_case
    for time_dim in (0, 1):
        tm = make_inputs(op, 0, 5, seed=0, **kw)
        case = to_time_dim1(tm) if time_dim else tm
        out = call(kernels, case, time_dim=time_dim)
        for o in out:
            assert o.shape == ((0, 5) if time_dim == 0 else (5, 0))
            assert o.dtype == torch.float32
    out = call(kernels, to_1d(make_inputs(op, 0, 5, seed=0, **kw)))
    assert all(o.shape == (0,) for o in out)


# --------------------------------------------------------------------------- #
# property tests (hypothesis): random shapes, densities, scalars; float64
# --------------------------------------------------------------------------- #
unit = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0))
clip = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 5.0))


@st.composite
def random_case(draw, op):
    T = draw(st.integers(0, 200))
    N = draw(st.integers(1, 40))
    kw = dict(
        density=draw(st.sampled_from([0.0, 0.05, 0.1, 0.3, 0.9])),
        truncated=draw(st.booleans()),
        next_values=draw(st.booleans()),
        bootstrap=draw(st.booleans()),
        initial=draw(st.booleans()),
        flag_dtype=draw(st.sampled_from([torch.bool, torch.uint8, torch.float64])),
    )
    scalars = {}
    if op in ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns",
              "eligibility_traces"):
        scalars["gamma"] = draw(unit)
    if op in ("gae", "vtrace", "retrace", "lambda_returns", "eligibility_traces"):
        scalars["lam"] = draw(unit)
    if op in ("vtrace", "retrace"):
        scalars["c_bar"] = draw(clip)
    if op == "vtrace":
        scalars["rho_bar"] = draw(clip)
        scalars["pg_rho_bar"] = draw(clip)
    if op == "episodic_prefix_sum":
        scalars["boundary"] = draw(st.sampled_from(["ends_at", "starts_at"]))
    if op == "linear_scan":
        scalars["reverse"] = draw(st.booleans())
    time_dim = draw(st.sampled_from([0, 1]))
    seed = draw(st.integers(0, 2**31 - 1))
    tm = make_inputs(op, T, N, seed=seed, dtype=torch.float64, scalars=scalars, **kw)
    return tm, time_dim


@pytest.mark.parametrize("op", OPS)
def test_property_float64(op):
    @settings(max_examples=10, deadline=None, derandomize=False,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(random_case(op))
    def check(case_and_layout):
        tm, time_dim = case_and_layout
        case = to_time_dim1(tm) if time_dim == 1 else tm
        assert_matches(case, time_dim=time_dim, ref_case=tm, check_inputs_unchanged=False)

    check()


@pytest.mark.parametrize("value", [0.99, 1.0, 0.0, 1e-310, 5e-324, 1e-40, 3e300, 1 / 3])
def test_coefficients_reach_the_kernel_bit_for_bit(value):
    """``kernels.launch.scalars`` splits a float64 into int32 halves that rebuild it exactly."""
    import struct

    from kernels.launch import scalars

    hi, lo = scalars(value)
    assert all(-2**31 <= half < 2**31 for half in (hi, lo))
    bits = (hi << 32) | (lo & 0xFFFFFFFF)
    assert struct.unpack("<d", struct.pack("<Q", bits & (2**64 - 1)))[0] == value


@pytest.mark.parametrize("pg_rho_bar", [1e-310, 5e-324, 1e-40])
def test_float64_coefficients_below_float32_range(pg_rho_bar):
    """A clipping threshold under float32's range scales every pg_adv: float64 must keep it (a float32
    argument would flush it to zero and make pg_adv all zeros)."""
    case = make_inputs("vtrace", 30, 5, dtype=torch.float64, scalars=dict(pg_rho_bar=pg_rho_bar, c_bar=1e-300))
    (vs, pg_adv), _ = assert_matches(case)
    assert bool((pg_adv != 0).any())


@pytest.mark.parametrize("kw, dtype, time_dim, x_as_pg", [
    (dict(), torch.bfloat16, 0, True), (dict(), torch.float32, 1, True), (dict(), torch.float32, 0, True),
    (dict(scalars=dict(rho_bar=2.0, c_bar=2.0, pg_rho_bar=2.0)), torch.bfloat16, 0, True),
    (dict(next_values=True), torch.bfloat16, 0, False), (dict(scalars=dict(pg_rho_bar=1.2)), torch.bfloat16, 0, False),
    (dict(scalars=dict(c_bar=0.9)), torch.float32, 1, False)], ids=str)
def test_vtrace_stores_vs_minus_v_as_pg_adv_only_where_that_is_exact(monkeypatch, kw, dtype, time_dim, x_as_pg):
    """The kernel skips the policy-gradient terms (``PG_IS_X``) with equal clipping thresholds and no
    ``next_values`` (``vtrace.pg_is_x``), and computes them otherwise; the reference agrees either way."""
    from kernels.estimators import vtrace as module

    launch, taken = module.launch, []

    def recording_launch(*args, **kwargs):
        taken.append(kwargs["PG_IS_X"])
        return launch(*args, **kwargs)

    monkeypatch.setattr(module, "launch", recording_launch)
    kernels.vtrace.plans.clear()  # a GPU call replays the plan of an earlier call of this shape
    tm = make_inputs("vtrace", 150, 9, seed=5, dtype=dtype, **kw)
    assert_matches(to_time_dim1(tm, contiguous=True) if time_dim else tm, time_dim=time_dim, ref_case=tm)
    assert taken == [x_as_pg]


LOOKBACK_WALKS = {(8, 1, False): "windowed_walk", (16, 1, True): "one_column_windowed_walk",
                  (32, 1, False): "one_by_one_walk", (32, 2, False): "one_by_one_walk_two_warps"}


@pytest.mark.parametrize(*sampled(("op_case", OP_CASES, case_id),
                                  ("block_n,warps,one_column", LOOKBACK_WALKS, LOOKBACK_WALKS.get)))
def test_lookback_with_many_small_tiles(op_case, block_n, warps, one_column):
    """Thousands of look-back tiles in flight at once (on a GPU) still give the reference's answer.

    Tiny tiles make a tile's predecessors most likely to be mid-publication when it looks back, so
    a tile that read an aggregate before all of it was written (or any other ordering slip)
    shows up here; it did, before each aggregate was published under a single flag. Both look-back
    walks: tiles up to ``kernels.launch.WINDOWED_LOOKBACK_MAX_N`` environments wide walk a window at a time
    (a wider one where they are the only column of environments); tiles of one warp and of two
    (V-trace's default ``[T, N]`` tiles below 8192 environments).
    """
    from kernels import LaunchConfig

    op, kw = op_case
    T, N, repeats = (8192, 256, 3) if DEVICE == "cuda" else (96, 12, 1)
    if one_column:
        T, N = max(T * 4, 512), block_n  # 32 tiles or more: the one-column window
    case = make_inputs(op, T, N, seed=seed_of("lookback", op_case), **kw)
    ref = call(R, upcast(case))
    for _ in range(repeats):
        out = call(kernels, case, config=LaunchConfig(16, block_n, num_warps=warps, lookback=True))
        for o, r in zip(out, ref):
            assert rel_err(o, r) < TOL[torch.float32]


@pytest.mark.skipif(DEVICE != "cuda", reason="chains of thousands of tiles in flight need a GPU")
@pytest.mark.parametrize(*sampled(("op_case", OP_CASES, case_id), ("layout", ["tn", "nt"]),
                                  ("walk", ["windowed", "one_by_one"])))
def test_long_lookback_chains_match_the_one_lane_walk(op_case, layout, walk):
    """Long chains of look-back tiles racing for one column's flags: 16 environments x 2^20 steps
    on the default block shapes (2048 tiles or more per chain, windowed walks), and 64 x 2^18 in
    16 x 32 one-warp tiles (16384 per chain, walked one by one). Each of three calls matches the
    one-lane walk without look-back (``sequential``, also float32). A variant that polled the
    window's flags with per-thread acquire loads failed here on an H200 (relative error 1e-3)."""
    from kernels import LaunchConfig
    from kernels.backends import get_backend

    op, kw = op_case
    T, N, config = (2**20, 16, None) if walk == "windowed" else (2**18, 64, LaunchConfig(16, 32, 1, lookback=True))
    tm = make_inputs(op, T, N, seed=seed_of("long_chains", op_case, layout, walk), **kw)
    time_dim = 0 if layout == "tn" else 1
    case = tm if layout == "tn" else to_time_dim1(tm, contiguous=True)
    expected = call(get_backend("sequential"), case, time_dim=time_dim)
    for _ in range(3):
        out = call(kernels, case, time_dim=time_dim, config=config)
        for o, e in zip(out, expected):
            assert rel_err(o, e) < TOL[torch.float32]


@pytest.mark.parametrize(*sampled(("op_case", OP_CASES, case_id), ("layout", ["tn", "nt_view", "nt"]),
                                  ("config", [(16, 8, 1, 3), (128, 2, 2, 3), (32, 16, 4, 5)], config_id)))
def test_pipelined_walks(op_case, layout, config):
    """A program walking many chunks with the next chunks' loads in flight (``num_stages > 1``)
    gives the reference's answer in both layouts (``[N, T]`` as a view of time-major memory and
    time-contiguous), with a partial last chunk and a partial last block of environments."""
    from kernels import LaunchConfig

    block_t, block_n, warps, stages = config
    op, kw = op_case
    T, N = (1000, 67) if DEVICE == "cuda" else (3 * block_t + 5, block_n + 3)
    tm = make_inputs(op, T, N, seed=seed_of("pipelined", op_case, layout, config), **kw)
    time_dim = 0 if layout == "tn" else 1
    case = tm if layout == "tn" else to_time_dim1(tm, contiguous=layout == "nt")
    ref = call(R, upcast(tm))
    launch = LaunchConfig(block_t, block_n, warps, lookback=False, num_stages=stages)
    out = call(kernels, case, time_dim=time_dim, config=launch)
    for o, r in zip(out, ref):
        assert rel_err(o, r.t() if time_dim == 1 and r.dim() == 2 else r) < TOL[torch.float32]


@pytest.mark.parametrize(*sampled(("op_case", OP_CASES, case_id), ("layout", ["tn", "nt"]),
                                  ("walk", ["one_by_one_lookback", "windowed_lookback", "pipelined", "unpipelined",
                                            "one_step_chunks"])))
def test_walks_in_both_layouts(op_case, layout, walk):
    """Every kind of walk gives the reference's answer in both layouts, with partial tiles: look-back
    tiles walked back one by one and by windows, pipelined and unpipelined walks, and chunks of one
    step (the ``sequential`` baseline's). Reverse walks hold ``[T, N]`` tiles latest first and scan
    them forward; time-contiguous tiles keep time order and scan backward."""
    from kernels import LaunchConfig

    config = {"one_by_one_lookback": LaunchConfig(16, 32, 1, lookback=True),
              "windowed_lookback": LaunchConfig(16, 8, 2, lookback=True),
              "pipelined": LaunchConfig(16, 8, 2, num_stages=3),
              "unpipelined": LaunchConfig(32, 4, 1),
              "one_step_chunks": LaunchConfig(1, 32, 1)}[walk]
    op, kw = op_case
    T, N = (1000, 67) if DEVICE == "cuda" else (min(config.block_t * 2 + 5, 19), config.block_n + 3)
    tm = make_inputs(op, T, N, seed=seed_of("walks", op_case, layout, walk), **kw)
    time_dim = 0 if layout == "tn" else 1
    case = tm if layout == "tn" else to_time_dim1(tm, contiguous=True)
    ref = call(R, upcast(tm))
    out = call(kernels, case, time_dim=time_dim, config=config)
    for o, r in zip(out, ref):
        assert rel_err(o, r.t() if time_dim == 1 and r.dim() == 2 else r) < TOL[torch.float32]
