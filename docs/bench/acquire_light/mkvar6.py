"""Look-back ceiling and acquire-load variants: .devrun/var8/<name>/kernels."""
import shutil
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
WALK = "carry = _walk_one_by_one(ws, flags, chunk, block, n_blocks, num_chunks, n, n_ok, N, agg_a)"
ACQ_DEF = '''

@triton.jit
def _load_acquire(ptr):
    return tl.inline_asm_elementwise("ld.global.acquire.gpu.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32,
                                     is_pure=False, pack=1)


@triton.jit
def _walk_one_by_one('''
POLL = 'state = tl.atomic_add(flag, 0, sem="acquire")'
P = {
    "nowalk": [("_scan.py", WALK, "carry = carry * 1.0")],
    "nolb": [("_scan.py", "    if chunk > 0:\n        _store_plane(ws, 0", "    if chunk < 0:\n        _store_plane(ws, 0"),
             ("_scan.py", "    _store_plane(ws, 2, carry_out, chunk, num_chunks, n, n_ok, N)\n    _raise_flag(my_flag, 2)\n", "")],
    "ldacq": [("_scan.py", "\n\n@triton.jit\ndef _walk_one_by_one(", ACQ_DEF),
              ("_scan.py", POLL + "\n        while", "state = _load_acquire(flag)\n        while"),
              ("_scan.py", "            " + POLL, "            state = _load_acquire(flag)")],
}
for name, patches in P.items():
    dst = ROOT / ".devrun" / "var8" / name / "kernels"
    if dst.parent.exists():
        shutil.rmtree(dst.parent)
    shutil.copytree(ROOT / "kernels", dst, ignore=shutil.ignore_patterns("__pycache__"))
    for f, old, new in patches:
        s = (dst / f).read_text()
        assert s.count(old) == 1, (name, f, old[:40], s.count(old))
        (dst / f).write_text(s.replace(old, new))
    print("made", name)
