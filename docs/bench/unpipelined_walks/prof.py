"""Profile one kernel call per cell under ncu: `python prof.py est N T layout [bt bn warps lookback stages]`.
Calls the estimator twice (compile, warm) outside the profiled range, then once inside it."""
import sys, torch
sys.path.insert(0, "scripts")  # run from the repository root
import bench_kernels as B
import kernels
from kernels import LaunchConfig
est, N, T, layout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
config = None
if len(sys.argv) > 5:
    bt, bn, w, lb, st = (int(a) for a in sys.argv[5:10])
    config = LaunchConfig(bt, bn, w, bool(lb), st)
args, kw = B.make_inputs(est, N, T, layout, torch.float32, "cuda", 0)
fn = getattr(kernels, est)
for _ in range(2):
    fn(*args, **kw, config=config)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
fn(*args, **kw, config=config)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("profiled", sys.argv[1:], flush=True)
