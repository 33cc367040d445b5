"""Per cell (N x T, `[T, N]`), the best device time of each version over its processes, and before / after.

  python docs/bench/run_successor/compare.py old_1.json rule_1.json,rule_2.json
"""
import json
import sys


def best_times(paths: str) -> dict:
    """(estimator, T, N, dtype) -> (block shape, best time over every round of every file)."""
    cells = {}
    for path in paths.split(","):
        for row in json.load(open(path)):
            key = (row["estimator"], row["T"], row["N"], row["dtype"])
            times = [x for x in row["times"]["default"] if isinstance(x, float)]
            shape, best = cells.get(key, (row["default"], float("inf")))
            cells[key] = (shape, min([best, *times]))
    return cells


if __name__ == "__main__":
    before, after = best_times(sys.argv[1]), best_times(sys.argv[2])
    for key, (shape, t_after) in after.items():
        if key in before:
            t_before = before[key][1]
            print(f"{key[0]:15s} {key[2]:6d} x {key[1]:<5d} {key[3]:4s} {shape:34s} "
                  f"before {t_before:8.2f} after {t_after:8.2f}  {t_before / t_after:5.3f}x")
