"""V-trace's and GAE's short `[N, T]` rows with time across warps (two or four warps per row of 128
steps, no shuffles: ``_launch.shuffles_time``), against their own block shapes and rl-triton, in one
process on the same inputs, with and without truncations (tenth session). Every output is checked
against the float64 reference first (``bench_kernels.checked_times``, with ``rl_triton/compare.py``'s
input preparation and adapters); device time of 20 calls replayed from a CUDA graph, two rounds.

usage (from the repository root): PYTHONPATH=<rl-triton>/src:. python docs/bench/odd_lengths/warps.py MODE
(MODE ``warm`` compiles the block shapes; ``time`` writes the log lines)
"""
import sys

import torch

sys.path.append("scripts")
sys.path.append("docs/bench/rl_triton")
import bench_kernels as B  # noqa: E402
import compare  # noqa: E402
import kernels  # noqa: E402

LABELS = ("default", "128x1w2", "128x2w4", "128x1w4", "128x4w8")
CELLS = [("vtrace", N, 128) for N in (2048, 4096, 8192, 32768)] + [("vtrace", 4096, 256), ("gae", 4096, 128),
                                                                    ("gae", 32768, 128)]


def calls(est):
    fn = getattr(kernels, est)
    out = {label: (lambda a, k, c=None if label == "default" else B.parse_config_label(label): fn(*a, **k, config=c))
           for label in LABELS}
    if est == "gae":  # rl-triton's GAE returns the advantages only
        out = {label: (lambda a, k, f=f: f(a, k)[0]) for label, f in out.items()}
    return {**out, "rl_triton": compare.rival_call(est)}


if sys.argv[1] == "warm":
    for est, N, T in CELLS:
        args, kw = compare.prepare(est, True)(*B.make_inputs(est, N, T, "nt", torch.float32, "cuda", 0))
        for call in calls(est).values():
            call(args, kw)
    torch.cuda.synchronize()
else:
    for est, N, T in CELLS:
        for truncations in (True, False):
            times = B.checked_times(calls(est), est, N, T, "nt", "f32", 2, 5, 20, prepare=compare.prepare(est, truncations),
                                    timer=lambda f: B.graph_us(f, "cuda", 0.0))
            print(f"{est} {N}x{T} nt f32 {'trunc' if truncations else 'no-trunc'}: "
                  + "  ".join(k + " " + "/".join(f"{x:.2f}" if isinstance(x, float) else str(x) for x in v)
                              for k, v in times.items()), flush=True)
