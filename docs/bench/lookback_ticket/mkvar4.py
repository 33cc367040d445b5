"""Patched copies of kernels/ under .devrun/var4/<name>/kernels (look-back experiments, session 5)."""
import shutil
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent

PID = ("_scan.py", "        ticket = tl.atomic_add(counter_ptr, 1)\n", "        ticket = tl.program_id(0)\n")
SLEEP_HELPER = ("_scan.py", "@triton.jit\ndef _walk_one_by_one(", '''@triton.jit
def _pause(x):
    """``x``, after the warp sleeps ~SLEEP_NS ns (spin back-off)."""
    return tl.inline_asm_elementwise("nanosleep.u32 SLEEP_NS; mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32,
                                     is_pure=False, pack=1)


@triton.jit
def _walk_one_by_one(''')
SLEEP_USE = ("_scan.py", """        while state == 0:
            state = tl.atomic_add(flag, 0, sem="acquire")
""", """        while state == 0:
            state = _pause(state)
            state = tl.atomic_add(flag, 0, sem="acquire")
""")
SINGLE = ("_scan.py", """    if chunk > 0:
        _store_plane(ws, 0, agg_a, chunk, num_chunks, n, n_ok, N)
        _store_plane(ws, 1, agg_b, chunk, num_chunks, n, n_ok, N)
        _raise_flag(my_flag, 1)  # only once both halves of the aggregate are written
        if BLOCK_N <= WINDOWED_LOOKBACK_MAX_N:
            carry = _walk_by_window(ws, flags, chunk, block, n_blocks, num_chunks, n, n_ok, N, agg_a)
        else:
            carry = _walk_one_by_one(ws, flags, chunk, block, n_blocks, num_chunks, n, n_ok, N, agg_a)
""", """    if chunk > 0:
        before = tl.atomic_add(_flag(flags, chunk - 1, n_blocks, block), 0, sem="acquire")
        if before == 2:
            carry = _read(ws, 2, chunk - 1, num_chunks, n, n_ok, N)
        else:
            _store_plane(ws, 0, agg_a, chunk, num_chunks, n, n_ok, N)
            _store_plane(ws, 1, agg_b, chunk, num_chunks, n, n_ok, N)
            _raise_flag(my_flag, 1)  # only once both halves of the aggregate are written
            if BLOCK_N <= WINDOWED_LOOKBACK_MAX_N:
                carry = _walk_by_window(ws, flags, chunk, block, n_blocks, num_chunks, n, n_ok, N, agg_a)
            else:
                carry = _walk_one_by_one(ws, flags, chunk, block, n_blocks, num_chunks, n, n_ok, N, agg_a)
""")
STATS_WALK = ("_scan.py", """    j = chunk - 1
    searching = True
    while searching:
        flag = _flag(flags, j, n_blocks, block)
        state = tl.atomic_add(flag, 0, sem="acquire")
        while state == 0:
            state = tl.atomic_add(flag, 0, sem="acquire")
        if state == 2:
            carry = acc_a + acc_b * _read(ws, 2, j, num_chunks, n, n_ok, N)
            searching = False
        else:
            acc_a = acc_a + acc_b * _read(ws, 0, j, num_chunks, n, n_ok, N)
            acc_b = acc_b * _read(ws, 1, j, num_chunks, n, n_ok, N)
            j -= 1
    return carry
""", """    j = chunk - 1
    searching = True
    spins = 0
    steps = 0
    while searching:
        flag = _flag(flags, j, n_blocks, block)
        state = tl.atomic_add(flag, 0, sem="acquire")
        while state == 0:
            spins += 1
            state = tl.atomic_add(flag, 0, sem="acquire")
        steps += 1
        if state == 2:
            carry = acc_a + acc_b * _read(ws, 2, j, num_chunks, n, n_ok, N)
            searching = False
        else:
            acc_a = acc_a + acc_b * _read(ws, 0, j, num_chunks, n, n_ok, N)
            acc_b = acc_b * _read(ws, 1, j, num_chunks, n, n_ok, N)
            j -= 1
    stats = flags + 1 + wide(num_chunks) * n_blocks
    tl.atomic_add(stats, spins)
    tl.atomic_add(stats + 1, steps)
    tl.atomic_add(stats + 2, 1)
    return carry
""")
STATS_LAUNCH = ("_launch.py", "        flags = torch.zeros(1 + num_chunks * n_blocks, dtype=torch.int32, device=batch.device)\n",
                "        flags = torch.zeros(1 + num_chunks * n_blocks + 3, dtype=torch.int32, device=batch.device)\n"
                "        global LAST_STATS\n        LAST_STATS = (flags, num_chunks * n_blocks)\n")
MAXNREG = ("_direct_launch.py", "            return self.kernel[(programs,)](*args, **constexprs, num_warps=num_warps)\n",
           "            extra = {'maxnreg': int(os.environ['MAXNREG'])} if os.environ.get('MAXNREG') else {}\n"
           "            return self.kernel[(programs,)](*args, **constexprs, num_warps=num_warps, **extra)\n")

def sleep(ns):
    return [SLEEP_HELPER, SLEEP_USE, ("_scan.py", "SLEEP_NS", str(ns))]

P = {
    "head": [],
    "pid": [PID],
    "sleep100": sleep(100),
    "sleep400": sleep(400),
    "single": [SINGLE],
    "stats": [STATS_WALK, STATS_LAUNCH],
    "mreg": [MAXNREG],
    "pidsingle": [PID, SINGLE],
    "pidmreg": [PID, MAXNREG],
}
for name, patches in P.items():
    dst = ROOT / ".devrun" / "var4" / name / "kernels"
    if dst.parent.exists():
        shutil.rmtree(dst.parent)
    shutil.copytree(ROOT / "kernels", dst, ignore=shutil.ignore_patterns("__pycache__"))
    for f, old, new in patches:
        s = (dst / f).read_text()
        assert s.count(old) >= 1, (name, f, old[:40])
        (dst / f).write_text(s.replace(old, new))
    print("made", name)
