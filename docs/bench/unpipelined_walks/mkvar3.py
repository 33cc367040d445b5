"""Variant fusedsucc: GAE's [T, N] tiles get V_{t+1} through the scan (4-value affine map) instead of a second load."""
import shutil
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
dst = ROOT / ".devrun" / "var2" / "fusedsucc" / "kernels"
if dst.parent.exists():
    shutil.rmtree(dst.parent)
shutil.copytree(ROOT / "kernels", dst, ignore=shutil.ignore_patterns("__pycache__"))
p = dst / "gae.py"
s = p.read_text()
old = """        if HAS_NEXT:
            v_after = _scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
        else:
            v_succ = _scan.successor_rows(
                v, v_ptr, chunk, num_chunks, t, n, s_v_t, s_v_n, n_ok, T, ACC, BLOCK_T, SHUFFLE_TIME
            )
            v_after = tl.where(t[:, None] == T - 1, bootstrap[None, :], v_succ)
        delta = r + gamma * tl.where(terminated, 0.0, v_after) - v
        alpha = tl.where(mask, delta, 0.0)
        beta = tl.where(mask & ~done, gamma * lam, tl.where(mask, 0.0, 1.0)).to(ACC)
        adv, carry = _scan.scan_chunk(
            alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, True, LOOKBACK, SHUFFLE_TIME
        )
"""
new = """        beta = tl.where(mask & ~done, gamma * lam, tl.where(mask, 0.0, 1.0)).to(ACC)
        if HAS_NEXT or SHUFFLE_TIME:
            if HAS_NEXT:
                v_after = _scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
            else:
                v_succ = _scan.successor_rows(
                    v, v_ptr, chunk, num_chunks, t, n, s_v_t, s_v_n, n_ok, T, ACC, BLOCK_T, SHUFFLE_TIME
                )
                v_after = tl.where(t[:, None] == T - 1, bootstrap[None, :], v_succ)
            delta = r + gamma * tl.where(terminated, 0.0, v_after) - v
            alpha = tl.where(mask, delta, 0.0)
            adv, carry = _scan.scan_chunk(
                alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, True, LOOKBACK, SHUFFLE_TIME
            )
        else:
            after = _scan.chunk_start(chunk, num_chunks, BLOCK_T, True) + BLOCK_T
            after_ok = n_ok & (tl.zeros_like(n) + after < T)
            v_edge = tl.where(after_ok, _scan.load_env(v_ptr + _scan.wide(after) * s_v_t, n, s_v_n, after_ok, ACC),
                              bootstrap)
            a = tl.where(mask, r - v, 0.0)
            e = tl.where(mask & ~terminated, gamma, 0.0).to(ACC)
            vf = tl.where(t[:, None] == T, bootstrap[None, :], v)
            A, E, B, _ = tl.associative_scan((a, e, beta, vf), 0, _affine_with_successor, reverse=True)
            adv, _, carry = _scan._apply_carry(A + E * v_edge[None, :], B, carry, chunk, block, T, N, ws, flags,
                                               BLOCK_T, BLOCK_N, True, LOOKBACK, SHUFFLE_TIME)
"""
assert s.count(old) == 1
s = s.replace(old, new)
s = s.replace("@_scan.coefficient_kernel\ndef _gae_kernel(", '''@triton.jit
def _affine_with_successor(a1, e1, b1, v1, a2, e2, b2, v2):
    """Segments of maps A_i = a + e V_after + b A_after with the segment's first V: (later) then (earlier)."""
    return a2 + e2 * v1 + b2 * a1, b2 * e1, b2 * b1, v2


@_scan.coefficient_kernel
def _gae_kernel(''')
s = s.replace("from kernels._triton import runs_triton, tl\n", "from kernels._triton import runs_triton, tl, triton\n")
p.write_text(s)
print("made fusedsucc")
