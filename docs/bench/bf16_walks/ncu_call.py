"""One call of an estimator under Nsight Compute (twenty-second session):
``python ncu_call.py est N T dtype [label]`` ([T, N] inputs; ``label`` a ``bench_kernels`` block-shape
label, the kernels' own choice without one); ``../unpipelined_walks/prof.py``'s ``profile_one_call``."""
import os
import sys

sys.path.insert(0, "scripts")  # run from the repository root
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "unpipelined_walks"))
import bench_kernels as B  # noqa: E402
from prof import profile_one_call  # noqa: E402

config = B.parse_config_label(sys.argv[5]) if len(sys.argv) > 5 else None
profile_one_call(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), "tn", B.DTYPES[sys.argv[4]], config)
print("profiled", sys.argv[1:], flush=True)
