"""Profile one kernel call per cell under ncu: `python prof.py est N T layout [bt bn warps lookback stages]`.
Calls the estimator twice (compile, warm) outside the profiled range, then once inside it
(``profile_one_call``, which ``../bf16_walks/ncu_call.py`` shares)."""
import sys

import torch

sys.path.insert(0, "scripts")  # run from the repository root
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from kernels import LaunchConfig  # noqa: E402


def profile_one_call(est: str, N: int, T: int, layout: str, dtype: torch.dtype, config) -> None:
    args, kw = B.make_inputs(est, N, T, layout, dtype, "cuda", 0)
    fn = getattr(kernels, est)
    for _ in range(2):
        fn(*args, **kw, config=config)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    fn(*args, **kw, config=config)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    config = None
    if len(sys.argv) > 5:
        bt, bn, w, lb, st = (int(a) for a in sys.argv[5:10])
        config = LaunchConfig(bt, bn, w, bool(lb), st)
    profile_one_call(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], torch.float32, config)
    print("profiled", sys.argv[1:], flush=True)
