"""Bad input raises ValueError / TypeError whose message names the argument.

The table is generated from each op's signature: every tensor argument gets a
wrong-shape, wrong-device and (for float data) integer-dtype mutation, every
scalar its out-of-range / non-finite / non-float values.
"""

from __future__ import annotations

import math
import re

import pytest
import torch

import kernels
from conftest import DEVICE, FLAG_NAMES, OPS, SIGNATURES, VECTOR_NAMES, Case, make_inputs, to_time_dim1

T, N = 6, 3
OTHER_DEVICE = "meta" if DEVICE == "cpu" else "cpu"

# which keyword scalars each op takes: name -> range kind
SCALARS = {
    "gae": {"gamma": "unit", "lam": "unit"},
    "vtrace": {"gamma": "unit", "lam": "unit", "rho_bar": "clip", "c_bar": "clip", "pg_rho_bar": "clip"},
    "retrace": {"gamma": "unit", "lam": "unit", "c_bar": "clip"},
    "lambda_returns": {"gamma": "unit", "lam": "unit"},
    "discounted_returns": {"gamma": "unit"},
    "eligibility_traces": {"gamma": "unit", "lam": "unit"},
    "episodic_prefix_sum": {},
    "linear_scan": {},
}
# a full valid call per op: every optional tensor given
FULL = {
    "gae": dict(next_values=True),
    "vtrace": dict(next_values=True),
    "retrace": dict(),
    "lambda_returns": dict(),
    "discounted_returns": dict(next_values=True),
    "eligibility_traces": dict(initial=True),
    "episodic_prefix_sum": dict(initial=True),
    "linear_scan": dict(initial=True),
}


def base(op) -> Case:
    return make_inputs(op, T, N, seed=0, **FULL[op])


def names_of(case: Case):
    """(key, name) for every tensor argument, key = position or keyword."""
    pos = SIGNATURES[case.op]["pos"]
    out = [(i, pos[i]) for i, a in enumerate(case.args) if isinstance(a, torch.Tensor)]
    out += [(k, k) for k, v in case.kwargs.items() if isinstance(v, torch.Tensor)]
    return out


def replaced(case: Case, key, value) -> Case:
    args, kwargs = list(case.args), dict(case.kwargs)
    if isinstance(key, int):
        args[key] = value
    else:
        kwargs[key] = value
    return Case(case.op, args, kwargs)


def _get(case, key):
    return case.args[key] if isinstance(key, int) else case.kwargs[key]


def mentions(message: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", message) is not None


# --------------------------------------------------------------------------- #
# the table: (id, op, mutate(case) -> (case, extra kwargs), exception, name)
# --------------------------------------------------------------------------- #
def _tensor_cases():
    rows = []
    for op in OPS:
        case = base(op)
        for idx, (key, name) in enumerate(names_of(case)):
            t = _get(case, key)
            is_vec = name in VECTOR_NAMES
            wrong_shape = torch.zeros((N + 1,) if is_vec else (T + 1, N), dtype=t.dtype, device=t.device)
            if idx > 0 or is_vec:  # a mismatch is reported against the first tensor
                rows.append((f"{op}-{name}-shape", op, key, wrong_shape, ValueError, name))
                rows.append((f"{op}-{name}-device", op, key, t.to(OTHER_DEVICE), ValueError, name))
            if name not in FLAG_NAMES:
                rows.append((f"{op}-{name}-int64", op, key, t.round().to(torch.int64), TypeError, name))
                rows.append((f"{op}-{name}-list", op, key, t.tolist(), TypeError, name))
            if not is_vec:
                rows.append((f"{op}-{name}-3d", op, key, t.reshape(1, T, N), ValueError, name))
        # ndim 0 for the first argument
        key, name = names_of(case)[0]
        rows.append((f"{op}-{name}-0d", op, key, torch.tensor(1.0, device=DEVICE), ValueError, name))
    return rows


TENSOR_CASES = _tensor_cases()


@pytest.mark.parametrize("cid,op,key,value,exc,name", TENSOR_CASES, ids=[r[0] for r in TENSOR_CASES])
def test_bad_tensor(cid, op, key, value, exc, name):
    case = replaced(base(op), key, value)
    with pytest.raises(exc) as info:
        getattr(kernels, op)(*case.args, **case.kwargs)
    assert mentions(str(info.value), name), str(info.value)


def _scalar_cases():
    rows = []
    for op in OPS:
        for name, kind in SCALARS[op].items():
            bad = [-0.1, math.nan, math.inf, -math.inf] + ([1.1] if kind == "unit" else [])
            rows += [(op, name, v, ValueError) for v in bad]
            rows += [(op, name, "0.9", TypeError), (op, name, torch.tensor(0.5), TypeError)]
    return rows


SCALAR_CASES = _scalar_cases()


@pytest.mark.parametrize("op,name,value,exc", SCALAR_CASES,
                         ids=[f"{o}-{n}-{v!r}" for o, n, v, _ in SCALAR_CASES])
def test_bad_scalar(op, name, value, exc):
    # the contract: gamma, lam in [0, 1]; rho_bar, c_bar, pg_rho_bar finite and >= 0
    case = base(op)
    with pytest.raises(exc) as info:
        getattr(kernels, op)(*case.args, **{**case.kwargs, name: value})
    assert mentions(str(info.value), name), str(info.value)


@pytest.mark.parametrize("op,name", [(o, n) for o in OPS for n in SCALARS[o]])
def test_scalar_edges_are_accepted(op, name):
    # 0 and 1 are valid for every scalar (the reject test above must not pass by rejecting all)
    case = base(op)
    for v in (0.0, 1.0):
        out = getattr(kernels, op)(*case.args, **{**case.kwargs, name: v})
        out = out if isinstance(out, tuple) else (out,)
        assert all(torch.isfinite(o).all() for o in out)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("time_dim", [2, -1, "0", None])
def test_bad_time_dim(op, time_dim):
    case = base(op)
    with pytest.raises((ValueError, TypeError)) as info:
        getattr(kernels, op)(*case.args, **case.kwargs, time_dim=time_dim)
    assert mentions(str(info.value), "time_dim"), str(info.value)


@pytest.mark.parametrize("op", OPS)
def test_scalars_are_keyword_only(op):
    case = base(op)
    with pytest.raises(TypeError):
        getattr(kernels, op)(*case.args, *case.kwargs.values())


@pytest.mark.parametrize("boundary", ["end", "", None, "STARTS_AT"])
def test_bad_boundary(boundary):
    case = base("episodic_prefix_sum")
    with pytest.raises((ValueError, TypeError)) as info:
        kernels.episodic_prefix_sum(*case.args, **case.kwargs, boundary=boundary)
    assert mentions(str(info.value), "boundary"), str(info.value)


def test_discounted_returns_truncated_needs_next_values():
    case = make_inputs("discounted_returns", T, N, seed=0, truncated=True)
    del case.kwargs["next_values"]
    with pytest.raises(ValueError) as info:
        kernels.discounted_returns(*case.args, **case.kwargs)
    msg = str(info.value)
    assert mentions(msg, "truncated") and mentions(msg, "next_values"), msg


@pytest.mark.parametrize("op", ["gae", "vtrace"])
def test_bootstrap_value_required_without_next_values(op):
    case = make_inputs(op, T, N, seed=0)
    case.args[-1] = None
    with pytest.raises(ValueError) as info:
        getattr(kernels, op)(*case.args, **case.kwargs)
    assert mentions(str(info.value), "bootstrap_value"), str(info.value)


def test_time_dim1_shape_mismatch_is_checked_in_callers_layout():
    # [N, T] data with a [T, N] flag tensor (T != N) is a mismatch
    case = base("gae")
    r, v, term = case.args[0].t(), case.args[1].t(), case.args[2]
    with pytest.raises(ValueError) as info:
        kernels.gae(r, v, term, case.args[3], time_dim=1)
    assert mentions(str(info.value), "terminated"), str(info.value)


@pytest.mark.parametrize("fields, name", [(dict(block_t=3, block_n=8), "block_t"),
                                          (dict(block_t=8, block_n=0), "block_n"),
                                          (dict(block_t=8, block_n=8, num_stages=0), "num_stages"),
                                          (dict(block_t=8, block_n=8, num_warps=3), "num_warps"),
                                          (dict(block_t=8, block_n=8, lookback=1), "lookback"),
                                          (dict(block_t=8, block_n=8, run=3), "run"),
                                          (dict(block_t=8, block_n=8, run=16), "run"),
                                          (dict(block_t=256, block_n=256), "block_t x block_n")])
def test_launch_config_names_the_bad_field(fields, name):
    with pytest.raises(ValueError, match=f"LaunchConfig.{name}"):
        kernels.LaunchConfig(**fields)
