"""GAE's async walk with and without its optional inputs (thirty-seventh session): ``ptxas`` builds the
twin in 167 registers without them and in 128 with ``next_values`` and truncations
(`builds.log`), and the depths that ran slow were those of fewer registers, so each form PPO or a user
may call is timed, the kernels' choice (the twin, where the rule takes it) against the Triton walk the
rule replaced, in one process, each checked against the float64 reference first, device time from a
CUDA graph, two rounds. Forms: ``truncated`` (as PPO calls it), ``next_values`` (with truncations),
``terminated`` (no truncations). Cells N x T.

  PYTHONPATH=. python docs/bench/async_walks/options.py OUT.json
"""
import json
import sys

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402

CELLS = [(8192, 3000), (16384, 2048), (20000, 500)]
TRITON_WALK = B.parse_config_label("64x64w4+3stages+latest+runs")
FORMS = {"truncated": lambda a, kw: (a, kw),
         "next_values": lambda a, kw: (a, dict(kw, next_values=torch.randn_like(a[1]))),
         "terminated": lambda a, kw: (a, {k: v for k, v in kw.items() if k != "truncated"})}

if __name__ == "__main__":
    copy_gbs = B.copy_bandwidth("cuda", 2**30, 25, 200)
    rows = []
    for N, T in CELLS:
        for form, prepare in FORMS.items():
            nbytes = B.cell_bytes("gae", N, T, torch.bfloat16)
            sets = B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
            calls = {"default": lambda a, kw: kernels.gae(*a, **kw),
                     "triton walk": lambda a, kw: kernels.gae(*a, **kw, config=TRITON_WALK)}
            times = B.checked_times(calls, "gae", N, T, "tn", "bf16", 2, 10, 50, prepare=prepare, input_sets=sets,
                                    timer=lambda f: B.graph_us(f, "cuda", 0.0, calls=max(B.GRAPH_CALLS, sets)))
            rows.append(dict(N=N, T=T, form=form, copy_gbs=copy_gbs, times=times))
            print(f"gae {N}x{T} bf16 {form:12s} " + "  ".join(
                f"{label} {'/'.join(f'{x:.2f}' if isinstance(x, float) else str(x)[:30] for x in t)}"
                for label, t in times.items()), flush=True)
            json.dump(rows, open(sys.argv[1], "w"), indent=1)
