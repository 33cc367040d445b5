"""Sweep the fused kernels' block shapes on the GPU and print the best per shape (JSON lines).

    python scripts/tune_kernels.py [--estimators gae,vtrace,retrace] [--out tune.jsonl]

Each candidate is checked against the float64 reference (first 64 environments) before it is timed
with ``triton.testing.do_bench`` (median). The winners feed ``kernels/_launch.py``'s table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

import torch
import triton.testing

import kernels
from kernels import LaunchConfig, reference

SHAPES = [  # (N, T)
    (32768, 8),
    (4096, 8),
    (32768, 16),
    (4096, 128),
    (512, 128),
    (16384, 128),
    (4096, 1024),
    (8192, 4096),
    (128, 4096),
    (512, 8192),
    (2048, 2048),
    (16, 65536),
    (16, 1048576),
]


def make_inputs(N, T, layout, device="cuda"):
    shape = (T, N) if layout == "tn" else (N, T)
    g = torch.Generator(device=device).manual_seed(0)

    def normal():
        return torch.randn(shape, device=device, generator=g)

    term = torch.rand(shape, device=device, generator=g) < 0.05
    trunc = torch.rand(shape, device=device, generator=g) < 0.02
    return dict(
        r=normal(),
        v=normal(),
        lr=0.3 * normal(),
        q=normal(),
        eq=normal(),
        term=term,
        trunc=trunc,
        b=torch.randn(N, device=device, generator=g),
    )


def call(name, x, td, config):
    if name == "gae":
        return kernels.gae(x["r"], x["v"], x["term"], x["b"], truncated=x["trunc"], time_dim=td, config=config)
    if name == "vtrace":
        return kernels.vtrace(
            x["r"], x["v"], x["lr"], x["term"], x["b"], truncated=x["trunc"], time_dim=td, config=config
        )
    if name == "retrace":
        return kernels.retrace(
            x["r"], x["q"], x["eq"], x["lr"], x["term"], truncated=x["trunc"], time_dim=td, config=config
        )
    raise ValueError(name)


def check(name, x, td, out, envs=64):
    out = out if isinstance(out, tuple) else (out,)

    def sl(t):
        t = t if td == 0 else t.t()
        return t[:, :envs].double().cpu()

    if name == "gae":
        ref = reference.gae(
            sl(x["r"]), sl(x["v"]), sl(x["term"]), x["b"][:envs].double().cpu(), truncated=sl(x["trunc"])
        )
    elif name == "vtrace":
        ref = reference.vtrace(
            sl(x["r"]), sl(x["v"]), sl(x["lr"]), sl(x["term"]), x["b"][:envs].double().cpu(), truncated=sl(x["trunc"])
        )
    else:
        ref = (
            reference.retrace(
                sl(x["r"]), sl(x["q"]), sl(x["eq"]), sl(x["lr"]), sl(x["term"]), truncated=sl(x["trunc"])
            ),
        )
    return max(((sl(o) - r).norm() / r.norm()).item() for o, r in zip(out, ref))


def candidates(N, T):
    for bt, bn, w, lb in itertools.product((8, 16, 32, 64, 128, 256), (16, 32, 64, 128, 256), (2, 4, 8), (False, True)):
        if bt > max(8, triton.next_power_of_2(T)) or bn > max(16, triton.next_power_of_2(N)):
            continue
        if bt * bn > 16384 or bt * bn < 256:
            continue
        if lb and bt >= T:
            continue
        yield LaunchConfig(bt, bn, w, lb)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--estimators", default="gae,vtrace,retrace")
    p.add_argument("--layouts", default="tn")
    p.add_argument("--out", default="tune.jsonl")
    p.add_argument("--budget", type=float, default=300.0)
    args = p.parse_args()
    start = time.time()
    with open(args.out, "w") as f:
        for layout in args.layouts.split(","):
            td = 0 if layout == "tn" else 1
            for N, T in SHAPES:
                x = make_inputs(N, T, layout)
                for name in args.estimators.split(","):
                    if time.time() - start > args.budget:
                        print("budget exhausted")
                        return
                    default_ms = triton.testing.do_bench(
                        lambda: call(name, x, td, None), warmup=5, rep=20, return_mode="median"
                    )
                    results = []
                    for cfg in candidates(N, T):
                        try:
                            out = call(name, x, td, cfg)
                            torch.cuda.synchronize()
                            err = check(name, x, td, out)
                            if not err < 1e-4:
                                results.append((float("inf"), cfg, f"WRONG {err:.1e}"))
                                continue
                            ms = triton.testing.do_bench(
                                lambda: call(name, x, td, cfg), warmup=5, rep=20, return_mode="median"
                            )
                            results.append((ms, cfg, ""))
                        except Exception as e:  # noqa: BLE001 - record and move on
                            results.append((float("inf"), cfg, repr(e)[:120]))
                    results.sort(key=lambda r: r[0])
                    best = results[0]
                    rec = dict(
                        layout=layout,
                        N=N,
                        T=T,
                        est=name,
                        default_us=default_ms * 1e3,
                        best_us=best[0] * 1e3,
                        best=vars(best[1]),
                        top5=[(r[0] * 1e3, vars(r[1])) for r in results[:5]],
                        errors=[(vars(r[1]), r[2]) for r in results if r[2]][:5],
                    )
                    f.write(json.dumps(rec) + "\n")
                    f.flush()
                    print(
                        f"{layout} N={N:6d} T={T:8d} {name:8s} default {default_ms * 1e3:9.1f}us best {best[0] * 1e3:9.1f}us {best[1]}",
                        flush=True,
                    )
                del x
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
