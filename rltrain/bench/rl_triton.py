"""The fused kernels against the public rl-triton library: the adapters that give rl-triton our inputs
in its own arguments, and the comparison's run (``scripts/compare_rl_triton.py``, whose docstring states
the conventions)."""

import json
from pathlib import Path
from types import SimpleNamespace

import torch

import kernels
from rltrain.bench import cells as B
from rltrain.bench import kernel_grid
from rltrain.bench.timing import copy_bandwidth, event_us, graph_us, host_us
from rltrain.machine import git_commit

ROOT = Path(__file__).resolve().parents[2]

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
        "boundary='ends_at' in both; rl-triton's GAE writes no returns: 'ours' is the fused GAE as called by "
        "default (advantages and returns stored, the advantages compared), 'ours_no_returns' with returns=False; "
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
    """The cell's inputs from ``rltrain.bench.cells.make_inputs``: ``PARAMS`` added; truncations dropped
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


def calls(est, library) -> dict:
    """The timed calls of a cell, ``{label: f(args, kwargs)}``: ``ours`` (the fused estimator as a caller
    gets it by default; GAE stores its returns too, and only its advantages are compared, rl-triton
    returning no returns), GAE's ``ours_no_returns`` (``returns=False``: the outputs rl-triton writes) and
    ``rl_triton`` (``library``'s, through the adapter)."""
    ours = getattr(kernels, est)
    timed = {"ours": lambda a, k: ours(*a, **k), "rl_triton": rival_call(est, library)}
    if est == "gae":
        timed["ours"] = lambda a, k: ours(*a, **k)[0]
        timed["ours_no_returns"] = lambda a, k: ours(*a, **k, returns=False)
    return timed


def compare(out_path) -> dict:
    """Every cell (``SHAPES`` for GAE and V-trace, ``MORE_SHAPES`` for ``MORE``), with and without
    truncations where the estimator takes them: each call checked against the float64 reference,
    then timed by ``do_bench`` (2 rounds), CUDA events, back-to-back calls and a CUDA graph; the
    results file ``{meta, rows}`` written to ``out_path``."""
    import rl_triton

    copy = copy_bandwidth("cuda", 2 * 2**30, 5, 20)
    meta = kernel_grid.environment(SimpleNamespace(device="cuda", warmup_ms=5.0, rep_ms=20.0, check_envs=64), copy)
    meta.update(rl_triton=getattr(rl_triton, "__version__", "?"), kernels_commit=git_commit(ROOT), layout="nt",
                dtype="f32", params=PARAMS, note=NOTE)
    print(f"copy {copy:.0f} GB/s; rl-triton {meta['rl_triton']}", flush=True)
    rows = []
    cells = [(est, N, T) for est in ("gae", "vtrace") for N, T in SHAPES]
    cells += [(est, N, T) for est in MORE for N, T in MORE_SHAPES]
    for est, N, T in cells:
        for truncations in ((True, False) if "truncated" in dict(B.SPECS[est]["kw"]) else (False,)):
            timed = calls(est, rl_triton)
            times = B.checked_times(timed, est, N, T, "nt", "f32", 2, 5, 20, prepare=prepare(est, truncations))
            row = dict(estimator=est, N=N, T=T, truncations=truncations, do_bench=times, copy_gbs=copy)
            args, kw = prepare(est, truncations)(*B.make_inputs(est, N, T, "nt", torch.float32, "cuda", 0))
            for label, call in timed.items():
                if not all(isinstance(t, float) for t in times[label]):
                    continue
                fn = lambda call=call: call(args, kw)  # noqa: E731
                row.setdefault("event", {})[label] = event_us(fn)
                row.setdefault("host", {})[label] = host_us(fn, "cuda", 200)
                row.setdefault("graph", {})[label] = graph_us(fn, "cuda", 0.0)
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
    return dict(meta=meta, rows=rows)
