"""Build patched copies of kernels/ under .devrun/var/<name>/kernels (timing experiments)."""
import shutil, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OLD_SUCC = "            v_succ = _scan.load_tile(v_ptr, t + 1, n, s_v_t, s_v_n, (t[:, None] + 1 < T) & n_ok[None, :], ACC)\n"
GATHER_SUCC = """            rows = tl.arange(0, BLOCK_T)
            after_row = (num_chunks - chunk) * BLOCK_T
            v_edge = tl.load(v_ptr + _scan.wide(after_row) * s_v_t + n.to(tl.int64) * s_v_n,
                             mask=n_ok & (n * 0 + after_row < T), other=0).to(ACC)
            shifted = tl.gather(v, tl.minimum(rows + 1, BLOCK_T - 1)[:, None] + tl.zeros([BLOCK_T, BLOCK_N], tl.int32), 0)
            v_succ = tl.where(rows[:, None] == BLOCK_T - 1, v_edge[None, :], shifted)
"""
NOSHIFT_SUCC = "            v_succ = v\n"
OLD_EDGE = """    rows = tl.arange(0, BLOCK_T)
    edge = 0 if REVERSE else BLOCK_T - 1
    return tl.sum(tl.where(rows[:, None] == edge, y, 0.0), axis=0)
"""
GATHER_EDGE = """    edge = 0 if REVERSE else BLOCK_T - 1
    return tl.reshape(tl.gather(y, tl.zeros([1, y.shape[1]], tl.int32) + edge, 0), [y.shape[1]])
"""
OLD_CARRY = """        y = A + B * carry[None, :]
        carry_out = edge_row(y, BLOCK_T, REVERSE)
"""
AGG_CARRY = """        y = A + B * carry[None, :]
        carry_out = edge_row(A, BLOCK_T, REVERSE) + edge_row(B, BLOCK_T, REVERSE) * carry
"""
OLD_CARRY2 = """        y = A + B * carry[None, :]
        carry_out = edge_row(y, BLOCK_T, True)
"""
AGG_CARRY2 = """        y = A + B * carry[None, :]
        carry_out = edge_row(A, BLOCK_T, True) + edge_row(B, BLOCK_T, True) * carry
"""
PATCHES = {
    "gather": [("gae.py", OLD_SUCC, GATHER_SUCC)],
    "noshift": [("gae.py", OLD_SUCC, NOSHIFT_SUCC)],
    "agg": [("_scan.py", OLD_CARRY, AGG_CARRY), ("_scan.py", OLD_CARRY2, AGG_CARRY2)],
    "edgegather": [("_scan.py", OLD_EDGE, GATHER_EDGE)],
}
NOMASK = [("_scan.py", "    return tl.load(tile_pointers(ptr, t, n, stride_t, stride_n), mask=mask, other=0).to(DTYPE)\n",
           "    return tl.load(tile_pointers(ptr, t, n, stride_t, stride_n)).to(DTYPE)\n"),
          ("_scan.py", "    return tl.load(tile_pointers(ptr, t, n, stride_t, stride_n), mask=mask, other=0) != 0\n",
           "    return tl.load(tile_pointers(ptr, t, n, stride_t, stride_n)) != 0\n"),
          ("_scan.py", "    tl.store(tile_pointers(ptr, t, n, stride_t, stride_n), value.to(ptr.dtype.element_ty), mask=mask)\n",
           "    tl.store(tile_pointers(ptr, t, n, stride_t, stride_n), value.to(ptr.dtype.element_ty))\n")]
PATCHES["nomask"] = NOMASK
PATCHES["gather_edgegather"] = PATCHES["gather"] + PATCHES["edgegather"]

for name in sys.argv[1:] or PATCHES:
    dest = ROOT / ".devrun" / "var" / name / "kernels"
    shutil.rmtree(dest.parent, ignore_errors=True)
    shutil.copytree(ROOT / "kernels", dest, ignore=shutil.ignore_patterns("__pycache__"))
    for fname, old, new in PATCHES[name]:
        f = dest / fname
        text = f.read_text()
        assert text.count(old) == 1, (name, fname)
        f.write_text(text.replace(old, new))
    print("built", name)
