"""Tables of this session's runs from their JSON (best of each version's rounds, per cent of the copy timed
in the same process): ``heldout.log`` (PLAN heldout: the first form, that stores ``vs - V`` in every
layout and V-trace's own tiles, against the starting kernels), ``rules.log`` (PLAN rules: V-trace's
tiles and GAE's against the starting kernels), ``heldout2.log`` (PLAN heldout2: the rule as kept against
the starting kernels), ``nt_forms.log`` (PLAN nt_forms: the two forms in one process).

  python docs/bench/vtrace_pg/table.py heldout|rules|heldout2|nt_forms
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def best(times):
    return min((t for t in times if isinstance(t, float)), default=float("nan"))


def rounds(name: str) -> dict:
    """``{(N, T, dtype, layout, form, label): (best us, bytes, copy GB/s, block shape)}`` over both rounds."""
    cells = {}
    for r in (1, 2):
        for row in json.load(open(os.path.join(HERE, f"{name}_{r}.json"))):
            times = row["times"] if isinstance(row["times"], dict) else {"default": row["times"]}
            for label, t in times.items():
                key = (row["N"], row["T"], row["dtype"], row["layout"], row["form"], label)
                shape = row.get("labels", {}).get(label, row["default"])
                old = cells.get(key, (float("inf"),))[0]
                cells[key] = (min(old, best(t)), row["bytes"], row["copy_gbs"], shape)
    return cells


def before_after(plan: str) -> None:
    before, after = rounds(f"{plan}_before"), rounds(f"{plan}_after")
    print("N x T, dtype, layout, form, tile: before us (% copy) -> after us (% copy), ratio; block shape before -> after")
    for key, (us, nbytes, gbs, shape) in after.items():
        was = before[key[:5] + ("default",)]
        print(f"{key[0]:>6} x {key[1]:<8} {key[2]:4} {key[3]} {key[4]:7} {key[5]:8} {was[0]:8.2f} "
              f"({nbytes / was[0] / 1e3 / gbs:4.0%}) -> {us:8.2f} ({nbytes / us / 1e3 / gbs:4.0%})  "
              f"{was[0] / us:5.2f}x  {was[3]} -> {shape}")


def nt_forms() -> None:
    rows = json.load(open(os.path.join(HERE, "nt_forms.json")))
    times = {(r["N"], r["T"], r["form"]): best(r["times"]) for r in rows}
    print("N x T float32 [N, T]: pg from x_{t+1} (clipped) -> vs - V (equal), ratio")
    for N, T in dict.fromkeys((r["N"], r["T"]) for r in rows):
        clipped, equal = times[(N, T, "clipped")], times[(N, T, "equal")]
        print(f"{N:>6} x {T:<6} {'16-aligned' if T % 16 == 0 else 'unaligned ':10} {clipped:8.2f} -> {equal:8.2f}  "
              f"{clipped / equal:5.2f}x")


if __name__ == "__main__":
    nt_forms() if sys.argv[1] == "nt_forms" else before_after(sys.argv[1])
