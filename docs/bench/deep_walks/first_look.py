"""The ninth session's first look (`first_look.log`): at 8192 x 4096 and 16384 x 2048 f32 `[T, N]`,
GAE in nine walk shapes, and with ``next_values`` given (``+nv``: no successor tile, 4 more bytes per
step) in four; the light kernels in nine; V-trace and Retrace in three; each output checked against
the float64 reference first. "default" was the eighth session's block shape when this ran.

usage (from the repository root; compile with K processes at once first):
  PYTHONPATH=. python docs/bench/deep_walks/first_look.py warm I K
  PYTHONPATH=. python docs/bench/deep_walks/first_look.py time OUT.json
"""
import sys, json, torch
sys.path.append("scripts")
import bench_kernels as B
import kernels
from kernels._launch import estimator_config
MODE = sys.argv[1]
L = "+latest+runs"
GAE_SHAPES = ["32x32w2+3stages", "64x32w2+3stages", "64x64w4+3stages", "32x32w4+3stages", "32x32w2+4stages",
              "32x64w4+3stages", "16x64w2+3stages", "64x32w4+3stages", "16x32w2+3stages"]
LIGHT = ["64x64w4+3stages", "64x32w2+3stages", "64x32w4+3stages", "128x32w4+3stages", "64x64w4+4stages",
         "64x32w2+4stages", "128x64w8+3stages", "128x32w2+3stages", "32x32w4+3stages"]
JOBS = []  # (est, N, T, variant, label)
for N, T in [(8192, 4096), (16384, 2048)]:
    for s in GAE_SHAPES:
        JOBS.append(("gae", N, T, "", s + L))
    for s in ["32x32w2+3stages", "64x32w2+3stages", "64x64w4+3stages", "32x32w4+3stages"]:
        JOBS.append(("gae", N, T, "nv", s + L))
    for est in ("eligibility_traces", "episodic_prefix_sum"):
        for s in LIGHT:
            JOBS.append((est, N, T, "", s + "+runs"))
    for est in ("lambda_returns", "vtrace", "retrace"):
        JOBS.append((est, N, T, "", "default"))
    for s in ["32x32w4+3stages", "32x32w2+4stages", "64x32w4+3stages"]:
        JOBS.append(("retrace", N, T, "", s + L))
        JOBS.append(("vtrace", N, T, "", s + L))


def inputs(est, N, T, variant):
    args, kw = B.make_inputs(est, N, T, "tn", torch.float32, "cuda", 0)
    if variant == "nv":
        g = torch.Generator(device="cuda").manual_seed(7)
        kw["next_values"] = torch.randn(T, N, device="cuda", generator=g)
        args = (*args[:3], None)
    return args, kw


def cfg(est, N, T, label):
    return estimator_config(est, T, N, False, 4) if label == "default" else B.parse_config_label(label)


if MODE == "warm":
    I, K = int(sys.argv[2]), int(sys.argv[3])
    for i, (est, N, T, variant, label) in enumerate(JOBS):
        if i % K != I or N != 8192:
            continue
        args, kw = inputs(est, 256, 256, variant)  # compile only: small shape, same specialization
        try:
            getattr(kernels, est)(*args, **kw, config=cfg(est, N, T, label))
        except Exception as e:
            print("FAIL", est, variant, label, repr(e)[:300], flush=True)
    torch.cuda.synchronize()
    sys.exit()

copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
print(f"copy {copy:.0f} GB/s", flush=True)
rows = []
cells = sorted({(e, n, t, v) for e, n, t, v, _ in JOBS}, key=lambda c: (c[1], c[0], c[3]))
for est, N, T, variant in cells:
    labels = [l for e, n, t, v, l in JOBS if (e, n, t, v) == (est, N, T, variant)]
    args, kw = inputs(est, N, T, variant)
    fn = getattr(kernels, est)
    refs = B.reference_outputs(est, args, kw, "tn", 64, 16384, "cuda")
    nbytes = B.cell_bytes(est, N, T, torch.float32) + (4 * N * T - 4 * N if variant == "nv" else 0)
    times = {l: [] for l in labels}
    for rnd in range(2):
        for label in labels:
            c = cfg(est, N, T, label)
            try:
                out = fn(*args, **kw, config=c)
                torch.cuda.synchronize()
                err = B.rel_err(out if isinstance(out, tuple) else (out,), refs[0], refs[1], "tn")
                if err > 1e-4:
                    times[label].append(f"WRONG {err:.1e}"); continue
                times[label].append(B.time_us(lambda: fn(*args, **kw, config=c), "cuda", 5, 20))
            except Exception as e:
                times[label].append(f"FAIL {repr(e)[:200]}")
    def fmt(v):
        nums = [x for x in v if isinstance(x, float)]
        s = "/".join(f"{x:.1f}" if isinstance(x, float) else x for x in v)
        return s + (f" ({nbytes / (min(nums) * 1e3) / copy:.0%})" if nums else "")
    print(f"{est}{'+nv' if variant else ''} {N}x{T} [{B.config_label(cfg(est, N, T, 'default'))}]: "
          + "  ".join(f"{k} {fmt(v)}" for k, v in times.items()), flush=True)
    rows.append(dict(estimator=est, variant=variant, N=N, T=T, times=times, bytes=nbytes, copy_gbs=copy))
    del args, kw; torch.cuda.empty_cache()
json.dump(rows, open(sys.argv[2], "w"), indent=1)
