"""Prototype: GAE for short time-major ([T, N]) rollouts in Gluon, with explicit layouts.

Each thread holds a run of BLOCK_T // TPW_T consecutive steps of one environment; TPW_T lanes of a
warp cover the sequence, TPW_N lanes and WARPS warps the environments. The reverse scan is then
in-thread runs plus log2(TPW_T) shuffle levels: no shared memory, no barrier.
"""
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def _affine_then(a1, b1, a2, b2):
    return a2 + b2 * a1, b1 * b2


@gluon.jit
def gae_tn_kernel(r_ptr, v_ptr, term_ptr, trunc_ptr, boot_ptr, adv_ptr, ret_ptr, T, N, gamma, lam,
                  BLOCK_T: gl.constexpr, TPW_T: gl.constexpr, WARPS: gl.constexpr, HAS_TRUNC: gl.constexpr,
                  LATEST_FIRST: gl.constexpr, SPT_N: gl.constexpr, WT: gl.constexpr):
    TPW_N: gl.constexpr = 32 // TPW_T
    if SPT_N == 1:
        L: gl.constexpr = gl.BlockedLayout([BLOCK_T // (TPW_T * WT), 1], [TPW_T, TPW_N], [WT, WARPS], [0, 1])
    else:
        L: gl.constexpr = gl.BlockedLayout([BLOCK_T // (TPW_T * WT), SPT_N], [TPW_T, TPW_N], [WT, WARPS], [1, 0])
    BLOCK_N: gl.constexpr = SPT_N * TPW_N * WARPS
    row = gl.arange(0, BLOCK_T, layout=gl.SliceLayout(1, L))
    if LATEST_FIRST:
        t = BLOCK_T - 1 - row
    else:
        t = row
    n = gl.program_id(0) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, L))
    n_ok = n < N
    mask = (t[:, None] < T) & n_ok[None, :]
    offs = t[:, None] * N + n[None, :]
    r = gl.load(r_ptr + offs, mask=mask, other=0.0).to(gl.float32)
    v = gl.load(v_ptr + offs, mask=mask, other=0.0).to(gl.float32)
    v_next = gl.load(v_ptr + offs + N, mask=(t[:, None] + 1 < T) & n_ok[None, :], other=0.0).to(gl.float32)
    boot = gl.load(boot_ptr + n, mask=n_ok, other=0.0).to(gl.float32)
    terminated = gl.load(term_ptr + offs, mask=mask, other=0) != 0
    done = terminated
    if HAS_TRUNC:
        done = done | (gl.load(trunc_ptr + offs, mask=mask, other=0) != 0)
    v_after = gl.where(t[:, None] == T - 1, boot[None, :], v_next)
    delta = r + gamma * gl.where(terminated, 0.0, v_after) - v
    alpha = gl.where(mask, delta, 0.0)
    beta = gl.where(mask & ~done, gamma * lam, gl.where(mask, 0.0, 1.0))
    adv, _ = gl.associative_scan((alpha, beta), 0, _affine_then, reverse=not LATEST_FIRST)
    gl.store(adv_ptr + offs, adv.to(adv_ptr.dtype.element_ty), mask=mask)
    gl.store(ret_ptr + offs, (adv + v).to(ret_ptr.dtype.element_ty), mask=mask)


def gae(rewards, values, terminated, bootstrap_value, *, truncated=None, gamma=0.99, lam=0.95, time_dim=0,
        tpw_t=4, warps=1, latest_first=True, block_t=None, spt_n=1, wt=1):
    assert time_dim == 0 and rewards.is_contiguous() and values.is_contiguous()
    T, N = rewards.shape
    adv, ret = torch.empty_like(rewards), torch.empty_like(rewards)
    block_t = block_t or max(triton.next_power_of_2(T), tpw_t * wt)
    has_trunc = truncated is not None
    term = terminated.view(torch.uint8)
    trunc = truncated.view(torch.uint8) if has_trunc else term
    grid = (triton.cdiv(N, spt_n * (32 // tpw_t) * warps),)
    gae_tn_kernel[grid](rewards, values, term, trunc, bootstrap_value, adv, ret, T, N, gamma, lam,
                        BLOCK_T=block_t, TPW_T=tpw_t, WARPS=warps, HAS_TRUNC=has_trunc,
                        LATEST_FIRST=latest_first, SPT_N=spt_n, WT=wt, num_warps=warps * wt)
    return adv, ret
