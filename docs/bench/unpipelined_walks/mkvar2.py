"""Patched copies of kernels/ under .devrun/var2/<name>/kernels (timing experiments, session 4)."""
import shutil
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
P = {
 "agg": [("_scan.py", """        y = A + B * carry[None, :]
        carry_out = edge_row(y, BLOCK_T, REVERSE, SHUFFLE_TIME)
""", """        y = A + B * carry[None, :]
        carry_out = edge_row(A, BLOCK_T, REVERSE, SHUFFLE_TIME) + edge_row(B, BLOCK_T, REVERSE, SHUFFLE_TIME) * carry
""")],
 "nowait": [("_scan.py", """        if BLOCK_N <= WINDOWED_LOOKBACK_MAX_N:
            carry = _walk_by_window(ws, flags, chunk, block, n_blocks, num_chunks, n, n_ok, N, agg_a)
        else:
            carry = _walk_one_by_one(ws, flags, chunk, block, n_blocks, num_chunks, n, n_ok, N, agg_a)
""", "")],
 "disc_full": [("discounted_returns.py", "mask & truncated, ACC)", "mask, ACC)")],
}
for name, patches in P.items():
    dst = ROOT / ".devrun" / "var2" / name / "kernels"
    if dst.parent.exists():
        shutil.rmtree(dst.parent)
    shutil.copytree(ROOT / "kernels", dst, ignore=shutil.ignore_patterns("__pycache__"))
    for f, old, new in patches:
        s = (dst / f).read_text()
        assert s.count(old) == 1, (name, f)
        (dst / f).write_text(s.replace(old, new))
    print("made", name)

import os, re
def persist(src: str) -> str:
    lines = src.split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith("    n = block * BLOCK_N + tl.arange(0, BLOCK_N)"))
    end = next(i for i in range(start, len(lines)) if lines[i] and not lines[i].startswith(" "))
    while not lines[end - 1].strip():
        end -= 1
    body = ["    " + re.sub(r"\bblock\b", "blk", l) if l.strip() else l for l in lines[start:end]]
    head = ["    last = block + 1 if LOOKBACK else tl.cdiv(N, BLOCK_N)",
            "    step = 1 if LOOKBACK else tl.num_programs(0)",
            "    for blk in range(block, last, step):"]
    return "\n".join(lines[:start] + head + body + lines[end:])
dst = ROOT / ".devrun" / "var2" / "persist" / "kernels"
if dst.parent.exists():
    shutil.rmtree(dst.parent)
shutil.copytree(ROOT / "kernels", dst, ignore=shutil.ignore_patterns("__pycache__"))
for f in ("gae.py", "lambda_returns.py", "linear_scan.py", "discounted_returns.py"):
    (dst / f).write_text(persist((dst / f).read_text()))
s = (dst / "discounted_returns.py").read_text()
(dst / "discounted_returns.py").write_text(s.replace("mask & truncated, ACC)", "mask, ACC)"))
s = (dst / "_launch.py").read_text()
old = "        programs = n_blocks\n"
assert s.count(old) == 1
s = s.replace(old, "        programs = triton.cdiv(n_blocks, int(os.environ.get('PERSIST_M', '1')))\n").replace("import importlib\n", "import importlib\nimport os\n")
(dst / "_launch.py").write_text(s)
print("made persist")
