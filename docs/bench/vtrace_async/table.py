"""The sweeps' tables (``warps_table.log``, ``fours_table.log``): each variant's JSON (``PLAN_VARIANT.json``) as time
and speedup over the kernels' own choice per cell.

  python3 table.py PLAN VARIANT...      # from this folder, e.g. table.py fours sr sk ck
"""
import json, sys
pre, vs = sys.argv[1], sys.argv[2:]
data = {v: json.load(open(f"{pre}_{v}.json")) for v in vs}
cells = [(r["N"], r["T"]) for r in data[vs[0]]]
labels = list(data[vs[0]][0]["times"].keys())
def best(t):
    xs=[x for x in t if isinstance(x,float)]; return min(xs) if xs else None
print("%-40s" % "label", " ".join("%12s" % f"{N}x{T}" for N,T in cells))
for v in vs:
    for lab in labels:
        row=[]
        for r in data[v]:
            b=best(r["times"][lab]); d=best(r["times"]["default"])
            row.append("%6.1f %4.2fx" % (b, d/b) if b else str(r["times"][lab])[:12])
        print("%-2s %-37s" % (v, lab[:37]), " ".join("%12s"%x for x in row))
