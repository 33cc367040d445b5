"""Time look-back cells with the kernels first on PYTHONPATH: `python var4_bench.py LABEL`."""
import os, sys, torch
sys.path.append("scripts")
import bench_kernels as B
import kernels
from kernels import LaunchConfig
LABEL = sys.argv[1]
L = lambda bt, bn, w: LaunchConfig(bt, bn, w, True)
TN = [(e, 8192, 4096, "tn") for e in ("gae", "lambda_returns", "discounted_returns", "retrace", "eligibility_traces")]
TN += [("vtrace", 2048, 4096, "tn"), ("gae", 16, 1048576, "nt"), ("gae", 64, 65536, "nt"), ("retrace", 16, 1048576, "nt")]
if os.environ.get("MORE"):
    TN += [(e, n, t, "tn") for e in ("gae", "lambda_returns") for n, t in ((4096, 4096), (2048, 2048), (1024, 4096), (512, 8192), (16384, 2048))]
CELLS = [(c, [None]) for c in TN]
if LABEL.startswith("headbf"):
    CELLS += [((e, 8192, 4096, "tn", "bf16"), [None, L(16, 128, 1), L(32, 64, 1), L(8, 128, 1), L(16, 64, 1)])
              for e in ("gae", "lambda_returns")]
if LABEL.startswith("final"):
    CELLS = [((e, n, t, "tn"), [None]) for n, t in ((8192, 4096), (4096, 4096), (2048, 2048), (1024, 4096), (512, 8192))
             for e in ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "eligibility_traces",
                       "episodic_prefix_sum", "linear_scan")]
    CELLS += [(c, [None]) for c in (("gae", 16, 1048576, "nt"), ("retrace", 16, 1048576, "nt"), ("gae", 64, 65536, "nt"))]
if LABEL.startswith("long"):
    CELLS = [((e, n, t, "nt"), [None]) for n, t in ((16, 1048576), (32, 262144), (8, 524288))
             for e in ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "eligibility_traces",
                       "episodic_prefix_sum", "linear_scan")]
if LABEL.startswith("sweep"):
    CELLS = [((e, n, t, "tn"), [None, L(32, 64, 1), L(32, 32, 1), L(16, 16, 1), L(64, 16, 1), L(128, 16, 2)])
             for e in ("gae",) for n, t in ((2048, 2048), (1024, 4096), (512, 8192))]
if LABEL.startswith("stats"):
    CELLS = [(c, [None]) for c in TN if c[1] >= 512]
print(LABEL, kernels.__file__, flush=True)
copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
print(LABEL, f"copy {copy:.0f} GB/s", flush=True)
for cell, configs in CELLS:
    est, N, T, layout = cell[:4]
    dtype = torch.bfloat16 if len(cell) > 4 else torch.float32
    args, kw = B.make_inputs(est, N, T, layout, dtype, "cuda", 0)
    fn = getattr(kernels, est)
    nbytes = B.cell_bytes(est, N, T, dtype)
    refs = B.reference_outputs(est, args, kw, layout, 64, 16384, "cuda")
    for c in configs:
        label = "default" if c is None else f"{c.block_t}x{c.block_n}w{c.num_warps}" + ("L" if c.lookback else f"s{c.num_stages}")
        try:
            out = fn(*args, **kw, config=c)
            torch.cuda.synchronize()
            err = B.rel_err(out if isinstance(out, tuple) else (out,), refs[0], refs[1], layout)
            if LABEL.startswith("stats"):
                from kernels import _launch
                flags, tiles = _launch.LAST_STATS
                s = flags[1 + tiles:].tolist()
                print(f"{LABEL} {est} {N}x{T} {layout} {label}: tiles {tiles} walked {s[2]} spins {s[0]} steps {s[1]} "
                      f"spins/walk {s[0] / max(s[2], 1):.2f} steps/walk {s[1] / max(s[2], 1):.2f} err {err:.1e}", flush=True)
                continue
            us = B.time_us(lambda: fn(*args, **kw, config=c), "cuda", 5, 20)
            print(f"{LABEL} {est} {N}x{T} {layout} {str(dtype)[6:]} {label}: {us:.1f} us {nbytes / (us * 1e-6) / 1e9 / copy:.0%} err {err:.1e}", flush=True)
        except Exception as e:
            print(f"{LABEL} {est} {N}x{T} {layout} {label}: FAIL {repr(e)[:200]}", flush=True)
    del args, kw
    torch.cuda.empty_cache()
