"""The fused kernels against the public rl-triton library (0.1.3), in the same process on the same
inputs and the same clock. GPU only: rl-triton takes CUDA tensors. It is not a dependency: put its
``src/`` first on ``PYTHONPATH``; its code is not in this repository.

    PYTHONPATH=<rl-triton>/src:. python scripts/compare_rl_triton.py docs/results/kernels_vs_rl_triton.json
    python scripts/results_tables.py rl-triton docs/results/kernels_vs_rl_triton.json   # its table

Its API differs from ours, so each adapter converts our inputs once, outside the timed call, to the
arguments its ``compute_*`` functions document: the timed call is what its user pays given data
already in its format. The conversion keeps every input's meaning:

* flags as float32. A step flagged both terminated and truncated, which our inputs allow and
  rl-triton documents as invalid, keeps only the termination in every cell: that changes none of our
  outputs (a termination drops the bootstrap and cuts the trace either way).
* with truncations, ``bootstrap_values`` ``[N, T]``: the value after each truncated step (ours:
  ``V_{t+1}``, or ``next_values[t]`` for discounted returns), zero at the other steps, and in the last
  column the value after the window: 0 if the last step terminated, its continuation if it was
  truncated, else our bootstrap value. Its GAE and V-trace read that column as the last step's next
  value only (their scan carry beyond the window is 0, as ours); its discounted returns read it as the
  return beyond the window too, which a truncated or terminated last step cuts. Without truncations
  its GAE and V-trace take ``last_value`` and its discounted returns the same last column.
* V-trace: the target policy's log-probabilities are our log-ratios, the behaviour's are 0; it has no
  ``lambda`` (ours 1) and clips its policy-gradient advantages at ``rho_bar`` (ours ``pg_rho_bar``).
* eligibility traces and episodic sums: the flags unshifted; both libraries reset after a flagged
  step (``done_{t-1}``), and both sums get ``boundary="ends_at"``.
* the discount and trace parameters, given to both explicitly (``PARAMS``).

Each output is checked against the float64 reference before timing (``bench_kernels.checked_times``),
with the random nonzero bootstrap values, so both compute the same numbers. Each estimator runs with
truncations (rl-triton's ``bootstrap_values`` path) and without (its ``last_value`` / no-``truncateds``
path).

Per cell and implementation: ``do_bench`` (L2 flushed, median), ``event`` (rl-triton's own method:
CUDA events around one synchronized call, median of 100 after 20 warm-up calls: host launch
included), ``host`` (back-to-back calls, wall time per call), ``graph`` (device only: 20 calls
replayed from a CUDA graph). Inputs are ``[N, T]`` (rl-triton's layout), float32. The output file
is ``{meta, rows}``: ``meta`` as ``bench_kernels.py`` writes it (device, driver, versions, date) plus
rl-triton's version, ``PARAMS`` and a note of these conventions.
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

SHAPES = [(4096, 128), (8192, 4096), (128, 4096), (4096, 8), (32768, 8), (32768, 16), (2048, 2048)]
MORE = ("discounted_returns", "eligibility_traces", "episodic_prefix_sum")
MORE_SHAPES = [(4096, 128), (8192, 4096), (32768, 16)]
# Keywords of our estimators in every cell (the float64 reference gets them too); each adapter maps
# them to rl-triton's names.
PARAMS = {
    "gae": dict(gamma=0.99, lam=0.95),
    "vtrace": dict(gamma=0.99, lam=1.0, rho_bar=1.0, c_bar=1.0, pg_rho_bar=1.0),
    "discounted_returns": dict(gamma=0.99),
    "eligibility_traces": dict(gamma=0.99, lam=0.95),
    "episodic_prefix_sum": dict(boundary="ends_at"),
}
NOTE = ("random nonzero bootstrap values in every cell; a step both terminated and truncated keeps only the "
        "termination; rl-triton's eligibility traces and episodic sums get the flags unshifted, the sums "
        "boundary='ends_at' in both; rl-triton's GAE writes no returns, so only the fused advantages are timed; "
        "graph times replay 20 calls on one input set, which the L2 holds for cells under about 60 MB")


def converted(args, kw, convert, cache={}):  # noqa: B006 - one conversion per input set
    if cache.get("source") is not args[0] or cache.get("convert") is not convert:
        cache.update(source=args[0], convert=convert, inputs=convert(args, kw))
    return cache["inputs"]


def f32(x):
    return x.to(torch.float32)


def continuation(next_value, boot, terminated, truncated):
    """rl-triton's ``bootstrap_values``: ``next_value`` after each truncated, not terminated, step and
    zero at the other steps; in the last column the value after the window: 0 after a termination,
    ``next_value`` after a truncation, else ``boot``."""
    zero = torch.zeros_like(next_value)
    bv = torch.where(truncated & ~terminated, next_value, zero)
    bv[:, -1] = torch.where(terminated[:, -1], zero[:, -1], torch.where(truncated[:, -1], next_value[:, -1], boot))
    return bv


def advantage_inputs(r, v, term, boot, kw):
    """GAE's and V-trace's common arguments: values, flags, and the values after the window's steps."""
    common = dict(rewards=r, values=v, terminateds=f32(term))
    if "truncated" not in kw:
        return dict(common, last_value=boot)
    nv = torch.cat([v[:, 1:], boot[:, None]], dim=1)  # ours: V_{t+1} after a truncation, boot at T-1
    return dict(common, truncateds=f32(kw["truncated"]), bootstrap_values=continuation(nv, boot, term, kw["truncated"]))


def gae_inputs(args, kw):
    r, v, term, boot = args
    return dict(advantage_inputs(r, v, term, boot, kw), gamma=kw["gamma"], lambda_=kw["lam"])


def vtrace_inputs(args, kw):
    r, v, log_rhos, term, boot = args
    if kw["lam"] != 1.0 or kw["pg_rho_bar"] != kw["rho_bar"]:
        raise ValueError("rl-triton's V-trace has lam = 1 and pg_rho_bar = rho_bar only, got "
                         f"lam={kw['lam']}, pg_rho_bar={kw['pg_rho_bar']}, rho_bar={kw['rho_bar']}")
    return dict(advantage_inputs(r, v, term, boot, kw), log_pi_target=log_rhos,
                log_pi_behavior=torch.zeros_like(log_rhos), gamma=kw["gamma"], rho_bar=kw["rho_bar"],
                c_bar=kw["c_bar"])


def returns_inputs(args, kw):
    r, term = args
    boot = kw["bootstrap_value"]
    if "truncated" not in kw:
        bv = torch.zeros_like(r)
        bv[:, -1] = boot
        return dict(rewards=r, terminateds=f32(term), gamma=kw["gamma"], bootstrap_values=bv)
    bv = continuation(kw["next_values"], boot, term, kw["truncated"])
    return dict(rewards=r, terminateds=f32(term), truncateds=f32(kw["truncated"]), gamma=kw["gamma"],
                bootstrap_values=bv)


def traces_inputs(args, kw):
    x, d = args
    return dict(gradients=x, dones=f32(d), gamma=kw["gamma"], lambda_=kw["lam"])


def prefix_sum_inputs(args, kw):
    x, d = args
    return dict(inputs=x, dones=f32(d), boundary=kw["boundary"])


RIVAL = {  # estimator: (rl-triton's function, the adapter building its arguments)
    "gae": ("compute_gae", gae_inputs),
    "vtrace": ("compute_vtrace", vtrace_inputs),
    "discounted_returns": ("compute_discounted_returns", returns_inputs),
    "eligibility_traces": ("compute_eligibility_traces", traces_inputs),
    "episodic_prefix_sum": ("compute_episodic_prefix_sum", prefix_sum_inputs),
}


def prepare(est, truncations):
    """The cell's inputs from ``bench_kernels.make_inputs``: ``PARAMS`` added; truncations dropped
    (``truncations`` false) or cleared where the step terminated."""
    def prep(args, kw):
        args, kw = list(args), dict(kw, **PARAMS[est])
        if "truncated" in kw:
            if truncations:
                terminated = args[[name for name, _ in B.SPECS[est]["pos"]].index("terminated")]
                kw["truncated"] = kw["truncated"] & ~terminated
            else:
                del kw["truncated"]
        if est == "discounted_returns" and not truncations:
            del kw["next_values"]
        return args, kw
    return prep


def rival_call(est, library):
    """``f(args, kwargs)``: ``library``'s (rl-triton's) estimator on our inputs, converted once."""
    name, convert = RIVAL[est]
    fn = getattr(library, name)
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


def main(out_path):
    import rl_triton

    copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
    meta = B.environment(SimpleNamespace(device="cuda", warmup_ms=5.0, rep_ms=20.0, check_envs=64), copy)
    meta.update(rl_triton=getattr(rl_triton, "__version__", "?"), layout="nt", dtype="f32", params=PARAMS, note=NOTE)
    print(f"copy {copy:.0f} GB/s; rl-triton {meta['rl_triton']}", flush=True)
    rows = []
    cells = [(est, N, T) for est in ("gae", "vtrace") for N, T in SHAPES]
    cells += [(est, N, T) for est in MORE for N, T in MORE_SHAPES]
    for est, N, T in cells:
        for truncations in ((True, False) if "truncated" in dict(B.SPECS[est]["kw"]) else (False,)):
            ours = getattr(kernels, est)
            calls = {"ours": lambda a, k: ours(*a, **k), "rl_triton": rival_call(est, rl_triton)}
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
