"""One call of an estimator under Nsight Compute (twenty-second session):
``python prof.py est N T dtype [label]`` ([T, N] inputs; ``label`` a ``bench_kernels`` block-shape
label, the kernels' own choice without one). Two calls outside the profiled range (compile, warm),
then one inside it."""
import sys

import torch

sys.path.insert(0, "scripts")  # run from the repository root
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402

est, N, T, dname = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
config = B.parse_config_label(sys.argv[5]) if len(sys.argv) > 5 else None
args, kw = B.make_inputs(est, N, T, "tn", B.DTYPES[dname], "cuda", 0)
fn = getattr(kernels, est)
for _ in range(2):
    fn(*args, **kw, config=config)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
fn(*args, **kw, config=config)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("profiled", sys.argv[1:], flush=True)
