"""The chunked carry across programs (decoupled look-back, kernels/scan/lookback.py) on hand-made tile states.

On a GPU, a tile's predecessors are in every state at once; under the interpreter tiles run one
after another, so the kernel tests only ever see finished predecessors. Here a one-tile kernel
runs ``carry_in`` against a workspace prepared by hand: predecessors that published only their
aggregate (flag 1) before the nearest one with a known carried-out value (flag 2), at several
distances from the tile.
"""

from __future__ import annotations

import pytest
import torch
from conftest import DEVICE

from kernels import scan
from kernels._triton import HAVE_TRITON, runs_triton, tl, triton

pytestmark = pytest.mark.skipif(not (HAVE_TRITON and runs_triton(torch.device(DEVICE))),
                                reason="needs Triton on CUDA or TRITON_INTERPRET=1")

BLOCK_T = 4


@triton.jit
def _carry_kernel(ws, flags, initial_ptr, out_ptr, chunk, T, N, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
                  WINDOW: tl.constexpr):
    n = tl.arange(0, BLOCK_N)
    agg_a = tl.zeros([BLOCK_N], tl.float64)
    initial = tl.load(initial_ptr + n)
    carry = scan.carry_in(agg_a, agg_a + 1.0, initial, chunk, 0, T, N, ws, flags, BLOCK_T, BLOCK_N, WINDOW)
    tl.store(out_ptr + n, carry)


def carried_in(chunk: int, known: int, seed: int = 0, block_n: int = 8, window: int = 8):
    """(kernel's carry into ``chunk``, expected, flags) when tiles ``< known`` have flag 2 and the
    tiles from ``known`` to ``chunk - 1`` flag 1 (``known >= 1``: the first tile always publishes
    its carried-out value directly). ``block_n`` environments per tile, one column of them; the
    walk takes ``window`` predecessors per step."""
    g = torch.Generator().manual_seed(seed)
    num_chunks = chunk + 1
    agg_a, agg_b, value = (torch.randn(num_chunks, block_n, generator=g, dtype=torch.float64) for _ in range(3))
    initial = torch.randn(block_n, generator=g, dtype=torch.float64)
    ws = torch.stack([agg_a, agg_b, value]).reshape(-1)
    flags = torch.zeros(num_chunks, dtype=torch.int32)
    flags[:known] = 2
    flags[known:chunk] = 1
    out = torch.empty(block_n, dtype=torch.float64)
    to = lambda t: t.to(DEVICE)  # noqa: E731
    ws, flags, initial_d, out = to(ws), to(flags), to(initial), to(out)
    _carry_kernel[(1,)](ws, flags, initial_d, out, chunk, num_chunks * BLOCK_T, block_n, BLOCK_T=BLOCK_T,
                        BLOCK_N=block_n, WINDOW=window)
    expected = value[known - 1]
    for j in range(known, chunk):  # the walk composes the nearer aggregates last
        expected = agg_a[j] + agg_b[j] * expected
    return out.cpu(), expected, flags.cpu()


@pytest.mark.parametrize("chunk, known", [(1, 1), (5, 5), (5, 4), (5, 1), (9, 2), (17, 8), (17, 1), (16, 1), (33, 17),
                                          (40, 3), (40, 24), (40, 25), (40, 39)])
@pytest.mark.parametrize("block_n, window", [(8, 8), (16, 32), (32, 1)],
                         ids=["windowed", "one_column_window", "one_by_one"])
def test_carry_in_composes_the_aggregates_up_to_the_nearest_known_value(chunk, known, block_n, window):
    """Every walk: a window of 8 tiles, of 32, and one tile at a time."""
    got, expected, flags = carried_in(chunk, known, seed=chunk * 31 + known, block_n=block_n, window=window)
    assert torch.allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert int(flags[chunk]) == 2  # and the tile published its own carried-out value
