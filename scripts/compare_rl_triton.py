"""The fused kernels against the public rl-triton library, in the same process on the same inputs and
the same clock. rl-triton is not a dependency: put its ``src/`` first on ``PYTHONPATH``; its code is
not in this repository.

    PYTHONPATH=<rl-triton>/src:. python scripts/compare_rl_triton.py docs/results/kernels_vs_rl_triton.json
    python scripts/results_tables.py rl-triton docs/results/kernels_vs_rl_triton.json   # its table

Its API differs from ours, so each adapter converts our inputs once, outside the timed call, to
what rl-triton takes (float32 flags, a ``[N, T]`` array of continuation values at truncated steps,
log-probabilities, flags shifted one step for its eligibility traces): the timed call is what its
user pays given data already in its format. Each output is checked against the float64 reference
before timing (``bench_kernels.checked_times``), so both compute the same numbers. Two conventions
of rl-triton's differ from ours, so the cells are prepared to agree on them: it seeds GAE's and
V-trace's scan carry beyond the window with the bootstrap value (ours: the advantage beyond the
window is 0), so the bootstrap value is 0 in the GAE and V-trace cells (``check_seeding`` shows the
difference); and it bootstraps a truncation at the last step from the same number as the window's
end, so no cell truncates its last step. Each estimator runs with truncations (rl-triton's
``bootstrap_values`` path) and without (its ``last_value`` / no-``truncateds`` path).

Per cell and implementation: ``do_bench`` (L2 flushed, median), ``event`` (rl-triton's own method:
CUDA events around one synchronized call, median of 100 after 20 warm-up calls: host launch
included), ``host`` (back-to-back calls, wall time per call), ``graph`` (device only: 20 calls
replayed from a CUDA graph). Inputs are ``[N, T]`` (rl-triton's layout), float32. The output file
is ``{meta, rows}``: ``meta`` as ``bench_kernels.py`` writes it (device, driver, versions, date) plus
rl-triton's version.
"""
import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
import rl_triton  # noqa: E402

SHAPES = [(4096, 128), (8192, 4096), (128, 4096), (4096, 8), (32768, 8), (32768, 16), (2048, 2048)]
MORE = ("discounted_returns", "eligibility_traces", "episodic_prefix_sum")
MORE_SHAPES = [(4096, 128), (8192, 4096), (32768, 16)]


def converted(args, kw, convert, cache={}):  # noqa: B006 - one conversion per input set
    if cache.get("source") is not args[0] or cache.get("convert") is not convert:
        cache.update(source=args[0], convert=convert, inputs=convert(args, kw))
    return cache["inputs"]


def f32(x):
    return x.to(torch.float32)


def continuation(next_value, boot, terminated, truncated):
    """rl-triton's ``bootstrap_values``: the value after each truncated (not terminated) step, the
    bootstrap value in the last column, zero elsewhere."""
    bv = torch.where(truncated & ~terminated, next_value, torch.zeros_like(next_value))
    bv[:, -1] = boot
    return bv


def gae_inputs(args, kw):
    r, v, term, boot = args
    if "truncated" not in kw:
        return dict(rewards=r, values=v, terminateds=f32(term), last_value=boot)
    nv = torch.cat([v[:, 1:], boot[:, None]], dim=1)  # ours: V_{t+1} after a truncation
    bv = continuation(nv, boot, term, kw["truncated"])
    return dict(rewards=r, values=v, terminateds=f32(term), truncateds=f32(kw["truncated"]), bootstrap_values=bv)


def vtrace_inputs(args, kw):
    r, v, log_rhos, term, boot = args
    d = gae_inputs((r, v, term, boot), kw)
    return dict(log_pi_target=log_rhos, log_pi_behavior=torch.zeros_like(log_rhos), **d)


def returns_inputs(args, kw):
    r, term = args
    if "truncated" not in kw:
        bv = torch.zeros_like(r)
        bv[:, -1] = kw["bootstrap_value"]
        return dict(rewards=r, terminateds=f32(term), bootstrap_values=bv)
    bv = continuation(kw["next_values"], kw["bootstrap_value"], term, kw["truncated"])
    return dict(rewards=r, terminateds=f32(term), truncateds=f32(kw["truncated"]), bootstrap_values=bv)


def traces_inputs(args, kw):
    x, d = args  # ours resets after a flagged step, rl-triton's on it: shift the flags one step
    return dict(gradients=x, dones=f32(torch.cat([torch.zeros_like(d[:, :1]), d[:, :-1]], dim=1)),
                gamma=0.99, lambda_=0.95)


RIVAL = {
    "gae": (rl_triton.compute_gae, gae_inputs),
    "vtrace": (rl_triton.compute_vtrace, vtrace_inputs),
    "discounted_returns": (rl_triton.compute_discounted_returns, returns_inputs),
    "eligibility_traces": (rl_triton.compute_eligibility_traces, traces_inputs),
    "episodic_prefix_sum": (rl_triton.compute_episodic_prefix_sum,
                            lambda a, k: dict(inputs=a[0], dones=f32(a[1]))),
}


def prepare(est, truncations):
    def prep(args, kw):
        args, kw = list(args), dict(kw)
        if est in ("gae", "vtrace"):
            args[-1] = torch.zeros_like(args[-1])
        if "truncated" in kw:
            if truncations:
                kw["truncated"] = kw["truncated"].clone()
                kw["truncated"][:, -1] = False
            else:
                del kw["truncated"]
        if est == "discounted_returns" and not truncations:
            del kw["next_values"]
        if est == "episodic_prefix_sum":
            kw["boundary"] = "starts_at"
        return args, kw
    return prep


def rival_call(est):
    fn, convert = RIVAL[est]
    return lambda a, k: fn(**converted(a, k, convert))


def event_us(fn, warmup=20, iters=100):
    """rl-triton's timing: CUDA events around one call between synchronizations."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(1e3 * start.elapsed_time(end))
    return statistics.median(times)


def check_seeding():
    """rl-triton's GAE with a nonzero bootstrap value against the float64 reference (``A_T = 0``)."""
    args, kw = B.make_inputs("gae", 256, 64, "nt", torch.float32, "cuda", 0)
    del kw["truncated"]
    refs = B.reference_outputs("gae", args, kw, "nt", 64, 16384, "cuda")
    adv = rival_call("gae")(args, kw)
    return B.rel_err((adv,), refs[0][:1], refs[1], "nt")


def main(out_path):
    copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
    meta = B.environment(SimpleNamespace(device="cuda", warmup_ms=5.0, rep_ms=20.0, check_envs=64), copy)
    meta.update(rl_triton=getattr(rl_triton, "__version__", "?"), layout="nt", dtype="f32")
    print(f"copy {copy:.0f} GB/s; rl-triton {meta['rl_triton']}", flush=True)
    print(f"rl-triton GAE, bootstrap value != 0, against A_T = 0: relative error {check_seeding():.1e}", flush=True)
    rows = []
    cells = [(est, N, T) for est in ("gae", "vtrace") for N, T in SHAPES]
    cells += [(est, N, T) for est in MORE for N, T in MORE_SHAPES]
    for est, N, T in cells:
        for truncations in ((True, False) if "truncated" in dict(B.SPECS[est]["kw"]) else (False,)):
            ours = getattr(kernels, est)
            calls = {"ours": lambda a, k: ours(*a, **k), "rl_triton": rival_call(est)}
            if est == "gae":  # only its advantages: rl-triton's GAE returns no returns
                calls["ours"] = lambda a, k: ours(*a, **k)[0]
            times = B.checked_times(calls, est, N, T, "nt", "f32", 2, 5, 20,
                                    prepare=prepare(est, truncations))
            row = dict(estimator=est, N=N, T=T, truncations=truncations, do_bench=times, copy_gbs=copy)
            args, kw = prepare(est, truncations)(*B.make_inputs(est, N, T, "nt", torch.float32, "cuda", 0))
            for label, call in calls.items():
                if not all(isinstance(t, float) for t in times[label]):
                    continue
                fn = lambda call=call: call(args, kw)  # noqa: E731
                row.setdefault("event", {})[label] = event_us(fn)
                row.setdefault("host", {})[label] = B.host_us(fn, "cuda", 200)
                row.setdefault("graph", {})[label] = B.graph_us(fn, "cuda", 0.0)
            fmt = lambda v: "/".join(f"{x:.1f}" if isinstance(x, float) else str(x) for x in v)  # noqa: E731
            extra = "  ".join(f"{m} " + " ".join(f"{k}={v:.1f}" if v else f"{k}=-" for k, v in row.get(m, {}).items())
                              for m in ("event", "host", "graph"))
            print(f"{est} {N}x{T} {'trunc' if truncations else 'no-trunc'}: do_bench "
                  + " ".join(f"{k}={fmt(v)}" for k, v in times.items()) + "  " + extra, flush=True)
            rows.append(row)
            del args, kw
            torch.cuda.empty_cache()
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
