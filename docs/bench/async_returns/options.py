"""Lambda and discounted returns' async walks in each form a caller may use (thirty-eighth session):
the kernels' choice (the twin, where the rule takes it) against the Triton walk the rule replaced, in
one process, each checked against the float64 reference first, device time from a CUDA graph, two
rounds. Forms: ``truncated`` (as the benchmark and PPO call them; discounted returns with
``next_values`` and ``bootstrap_value``), ``terminated`` (no truncations), and for discounted returns
``next_values`` (no truncations: ``G_T`` from them) and ``zero_end`` (terminations only, ``G_T = 0``).
One cell in each of the rule's ranges, N x T. PLAN ``light``: lambda and discounted returns against the
Triton walks their sweeps' cells took (``TRITON_WALKS``); ``retrace``: Retrace with and without
truncations, and GAE (whose rule gained 64 x 128 tiles) with truncations, with ``next_values`` too and
with terminations only, against the block shape the kernels take without the async walks
(``_launch.estimator_config(..., async_walks=False)``); ``discounted_first``: discounted returns in
their four forms at 8192 x 3000, in the final rule's 128 x 64 range, against that block shape too;
``vtrace`` (thirty-ninth session, ``../vtrace_async``): V-trace with truncations, with ``next_values`` too
and with terminations only, against that block shape.

  PYTHONPATH=. python docs/bench/async_returns/options.py PLAN OUT.json
"""
import json
import sys

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from kernels import _launch  # noqa: E402

CELLS = [(8192, 3000), (12288, 2048), (20000, 500), (30720, 1024)]
TRITON_WALKS = {"lambda_returns": B.parse_config_label("64x32w4+3stages+latest+runs+envs4"),
                "discounted_returns": B.parse_config_label("64x32w2+3stages+latest+runs+envs4")}
without = lambda kw, *names: {k: v for k, v in kw.items() if k not in names}  # noqa: E731
FORMS = {"lambda_returns": {"truncated": lambda a, kw: (a, kw),
                            "terminated": lambda a, kw: (a, without(kw, "truncated"))},
         "discounted_returns": {"truncated": lambda a, kw: (a, kw),
                                "terminated": lambda a, kw: (a, without(kw, "truncated", "next_values")),
                                "next_values": lambda a, kw: (a, without(kw, "truncated", "bootstrap_value")),
                                "zero_end": lambda a, kw: (a, without(kw, "truncated", "next_values",
                                                                      "bootstrap_value"))},
         "vtrace": {"truncated": lambda a, kw: (a, kw),
                    "next_values": lambda a, kw: (a, dict(kw, next_values=torch.randn_like(a[1]))),
                    "terminated": lambda a, kw: (a, without(kw, "truncated"))},
         "retrace": {"truncated": lambda a, kw: (a, kw), "terminated": lambda a, kw: (a, without(kw, "truncated"))},
         "gae": {"truncated": lambda a, kw: (a, kw),
                 "next_values": lambda a, kw: (a, dict(kw, next_values=torch.randn_like(a[1]))),
                 "terminated": lambda a, kw: (a, without(kw, "truncated"))}}
PLANS = {"light": ("lambda_returns", "discounted_returns"), "retrace": ("retrace", "gae"),
         "discounted_first": ("discounted_returns",), "vtrace": ("vtrace",)}


def triton_walk(est: str, N: int, T: int):
    """The Triton walk the async walk replaced at ``N x T`` (bf16 ``[T, N]``)."""
    if est in TRITON_WALKS and sys.argv[1] == "light":
        return TRITON_WALKS[est]
    return _launch.estimator_config(est, T, N, False, 2, async_walks=False)

if __name__ == "__main__":
    copy_gbs = B.copy_bandwidth("cuda", 2**30, 25, 200)
    rows = []
    for est in PLANS[sys.argv[1]]:
        forms = FORMS[est]
        for N, T in CELLS[:1] if sys.argv[1] == "discounted_first" else CELLS:
            for form, prepare in forms.items():
                nbytes = B.cell_bytes(est, N, T, B.DTYPES["bf16"])
                sets = B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
                fn = getattr(kernels, est)
                calls = {"default": lambda a, kw: fn(*a, **kw),
                         "triton walk": lambda a, kw: fn(*a, **kw, config=triton_walk(est, N, T))}
                times = B.checked_times(calls, est, N, T, "tn", "bf16", 2, 10, 50, prepare=prepare, input_sets=sets,
                                        timer=lambda f: B.graph_us(f, "cuda", 0.0, calls=max(B.GRAPH_CALLS, sets)))
                rows.append(dict(estimator=est, N=N, T=T, form=form, copy_gbs=copy_gbs, times=times))
                print(f"{est} {N}x{T} bf16 {form:12s} " + "  ".join(
                    f"{label} {'/'.join(f'{x:.2f}' if isinstance(x, float) else str(x)[:30] for x in t)}"
                    for label, t in times.items()), flush=True)
                json.dump(rows, open(sys.argv[2], "w"), indent=1)
