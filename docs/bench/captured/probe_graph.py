"""Wall time per call, back-to-back, of each estimator's eager call and of the same call captured by
hand in a CUDA graph and replayed on the same tensors, at 4096 x 128 (before ``kernels.capture``)."""
import sys

import torch

sys.path.insert(0, '.')
sys.path.insert(0, 'scripts')
import bench_kernels as B  # noqa: E402
from probe_host_overhead import per_call_us  # noqa: E402

import kernels  # noqa: E402

for layout in ("tn", "nt"):
    for est in kernels.ESTIMATORS:
        if layout == "nt" and est not in ("gae", "vtrace"):
            continue
        args, kwargs = B.make_inputs(est, 4096, 128, layout, torch.float32, "cuda", seed=0)
        fn = getattr(kernels, est)
        call = lambda: fn(*args, **kwargs)  # noqa: E731
        eager = per_call_us(call, 2000)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                call()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = call()
        g.replay()
        torch.cuda.synchronize()
        ref = call()
        same = all(torch.equal(a, b) for a, b in zip(out if isinstance(out, tuple) else (out,),
                                                     ref if isinstance(ref, tuple) else (ref,)))
        print(f"{est:20s} {layout} eager {eager:6.1f} us  graph replay {per_call_us(g.replay, 2000):6.1f} us  "
              f"same={same}", flush=True)
