"""Time cells x configs with the kernels first on PYTHONPATH: `python var2_bench.py VARIANT`."""
import sys, time, torch
sys.path.append("scripts")
import bench_kernels as B
import kernels
from kernels import LaunchConfig
VARIANT = sys.argv[1]
import os
TAG = VARIANT + os.environ.get("PERSIST_M", "")
L = lambda bt, bn, w: LaunchConfig(bt, bn, w, True)
P = lambda bt, bn, w, s=3: LaunchConfig(bt, bn, w, False, s)
TN_WALKS = [P(16, 16, 2), P(16, 16, 2, 4), P(8, 32, 1), P(16, 32, 2), P(32, 16, 2), P(8, 16, 1), P(16, 8, 1), P(32, 32, 4), P(8, 64, 2)]
PLAN = {
    "base": [(("gae", 8192, 4096, "tn"), [None] + TN_WALKS), (("vtrace", 8192, 4096, "tn"), [None, P(8, 16, 1), P(16, 8, 1)]),
             (("lambda_returns", 8192, 4096, "nt"), [None]), (("linear_scan", 8192, 4096, "nt"), [None]),
             (("discounted_returns", 8192, 4096, "nt"), [None]), (("discounted_returns", 8192, 4096, "tn"), [None]),
             (("gae", 512, 8192, "tn"), [None]), (("vtrace", 512, 8192, "tn"), [None]),
             (("gae", 4096, 128, "tn"), [None, P(16, 32, 1), P(32, 32, 2), P(16, 16, 1), P(8, 32, 1), L(32, 32, 1), L(16, 64, 1)])],
    "agg": [(("gae", 8192, 4096, "tn"), TN_WALKS), (("vtrace", 8192, 4096, "tn"), [None, P(8, 16, 1), P(16, 8, 1)]),
            (("lambda_returns", 8192, 4096, "nt"), [None]), (("linear_scan", 8192, 4096, "nt"), [None]),
            (("gae", 8192, 4096, "nt"), [None]), (("gae", 4096, 128, "tn"), [P(16, 32, 1), P(32, 32, 2), P(16, 16, 1), P(8, 32, 1)])],
    "nowait": [(("gae", 8192, 4096, "tn"), [None]), (("gae", 512, 8192, "tn"), [None]), (("vtrace", 512, 8192, "tn"), [None]),
               (("gae", 128, 4096, "tn"), [None])],
    "persist": [(("lambda_returns", 8192, 4096, "nt"), [None]), (("linear_scan", 8192, 4096, "nt"), [None]),
                (("gae", 8192, 4096, "nt"), [None]), (("discounted_returns", 8192, 4096, "nt"), [None]),
                (("lambda_returns", 32768, 1024, "nt"), [None]), (("gae", 16384, 2048, "nt"), [None]),
                (("gae", 4096, 4096, "nt"), [None])],
    "base2": [(("lambda_returns", 8192, 4096, "nt"), [None]), (("linear_scan", 8192, 4096, "nt"), [None]),
                (("gae", 8192, 4096, "nt"), [None]), (("discounted_returns", 8192, 4096, "nt"), [None]),
                (("lambda_returns", 32768, 1024, "nt"), [None]), (("gae", 16384, 2048, "nt"), [None]),
                (("gae", 4096, 4096, "nt"), [None])],
    "base_sweepnt": [((e, 8192, 4096, "nt"), [None, P(128, 2, 2, 1), P(128, 2, 2, 2), P(128, 2, 2, 4), P(128, 4, 4, 3), P(8, 64, 2, 1), P(8, 64, 2, 3),
                 P(8, 64, 2, 4), P(16, 32, 2, 3), P(8, 128, 4, 3), P(16, 64, 4, 3), P(32, 32, 4, 3), P(8, 32, 1, 3), P(16, 16, 1, 3), P(32, 16, 2, 3)])
                for e in ("lambda_returns", "linear_scan", "gae")],
    "disc_full_stages": [((e, n, t, "nt"), [P(128, 2, 2, 1), P(128, 2, 2, 3)] + ([P(64, 4, 2, 1), P(64, 4, 2, 3)] if e == "vtrace" else []))
                         for n, t in ((8192, 4096), (16384, 2048), (2048, 4096), (32768, 1024))
                         for e in ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "eligibility_traces",
                                   "episodic_prefix_sum", "linear_scan")],
    "disc_full_stages2": [((e, n, t, "nt"), [P(128, 2, 2, 1), P(128, 2, 2, 3)])
                          for n, t in ((4096, 4096), (4096, 1024), (8192, 512), (2048, 2048), (65536, 512))
                          for e in ("lambda_returns", "discounted_returns", "linear_scan", "eligibility_traces")]
                         + [((e, 16384, 2048, "nt", "bf16"), [P(256, 2, 2, 1), P(256, 2, 2, 3), P(128, 2, 2, 1)])
                            for e in ("lambda_returns", "discounted_returns", "linear_scan", "gae")],
    "base_tn": [(("discounted_returns", n, t, "tn"), [None]) for n, t in ((8192, 4096), (512, 8192), (4096, 128))]
               + [((e, n, t, "nt"), [P(512, 1, 4, 1), P(512, 1, 4, 3)]) for n, t in ((1024, 4096), (512, 8192))
                  for e in ("lambda_returns", "discounted_returns", "linear_scan")],
    "disc_full_tn": [(("discounted_returns", n, t, "tn"), [None]) for n, t in ((8192, 4096), (512, 8192), (4096, 128))],
    "final": [((e, n, t, "nt"), [None]) for n, t in ((2048, 2048), (4096, 2048), (4096, 4096), (8192, 4096), (16384, 2048), (32768, 1024), (65536, 512))
              for e in ("lambda_returns", "discounted_returns", "linear_scan")]
             + [((e, 16384, 2048, "nt", "bf16"), [None]) for e in ("lambda_returns", "discounted_returns", "linear_scan")]
             + [(("discounted_returns", n, t, "tn"), [None]) for n, t in ((8192, 4096), (512, 8192), (2048, 2048))]
             + [(("gae", 8192, 4096, "nt"), [None]), (("vtrace", 8192, 4096, "nt"), [None])],
    "base_mid": [((e, n, t, "nt"), [None, P(128, 2, 2, 1), P(128, 1, 1, 3), P(128, 1, 1, 1), P(256, 1, 2, 3), P(256, 2, 4, 3),
                  P(512, 1, 4, 3), P(128, 4, 4, 3), P(64, 4, 2, 3), L(128, 2, 2), L(128, 4, 4), L(256, 1, 2), L(256, 2, 4), L(512, 1, 4),
                  L(128, 1, 1)])
                 for n, t in ((2048, 2048), (4096, 1024), (8192, 512)) for e in ("gae", "lambda_returns")],
    "base_s1": [((e, n, 4096, "nt"), [None, P(128, 1, 1, 1), P(128, 4, 4, 1), P(128, 8, 8, 1)])
                for n in (8192, 4096) for e in ("lambda_returns", "discounted_returns", "linear_scan")],
    "persist_s1": [((e, n, 4096, "nt"), [P(128, 2, 2, 1), P(128, 1, 1, 1)])
                for n in (8192, 4096) for e in ("lambda_returns", "discounted_returns", "linear_scan")],
    "base_s1b": [((e, n, t, "nt"), [None, P(128, 1, 1, 1)])
                for n, t in ((16384, 2048), (32768, 1024), (65536, 512), (4096, 2048)) for e in ("lambda_returns", "discounted_returns", "linear_scan")]
               + [((e, 16384, 2048, "nt", "bf16"), [None, P(256, 1, 1, 1), P(128, 1, 1, 1)]) for e in ("lambda_returns", "discounted_returns", "linear_scan")]
               + [((e, 8192, 4096, "nt"), [None, P(128, 1, 1, 1), P(128, 1, 1, 3)]) for e in ("eligibility_traces", "episodic_prefix_sum", "gae", "vtrace", "retrace")],
    "disc_full": [(("discounted_returns", 8192, 4096, "nt"), [None]), (("discounted_returns", 8192, 4096, "tn"), [None])],
}
PLAN["head_final"] = PLAN["new_final"] = PLAN["final"]
assert VARIANT.startswith(("base", "new")) or VARIANT.split("_")[0] in kernels.__file__, kernels.__file__
copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
print(VARIANT, f"copy {copy:.0f} GB/s", flush=True)
for cell, configs in PLAN[VARIANT]:
    est, N, T, layout = cell[:4]
    dtype = torch.bfloat16 if len(cell) > 4 else torch.float32
    args, kw = B.make_inputs(est, N, T, layout, dtype, "cuda", 0)
    fn = getattr(kernels, est)
    nbytes = B.cell_bytes(est, N, T, dtype)
    refs = None if VARIANT == "nowait" else B.reference_outputs(est, args, kw, layout, 64, 16384, "cuda")
    for c in configs:
        label = "default" if c is None else f"{c.block_t}x{c.block_n}w{c.num_warps}" + ("L" if c.lookback else f"s{c.num_stages}")
        try:
            out = fn(*args, **kw, config=c)
            torch.cuda.synchronize()
            err = B.rel_err(out if isinstance(out, tuple) else (out,), refs[0], refs[1], layout) if refs else float("nan")
            us = B.time_us(lambda: fn(*args, **kw, config=c), "cuda", 5, 20)
            print(f"{TAG} {est} {N}x{T} {layout} {dtype} {label}: {us:.1f} us {nbytes / (us * 1e-6) / 1e9 / copy:.0%} err {err:.1e}", flush=True)
        except Exception as e:
            print(f"{TAG} {est} {N}x{T} {layout} {label}: FAIL {repr(e)[:160]}", flush=True)
    del args, kw
    torch.cuda.empty_cache()
