"""Wall time per call, back-to-back, of each estimator's eager call and of the same call replayed from a CUDA graph."""
import sys, time, torch
sys.path.insert(0, '.')
sys.path.insert(0, 'scripts')
import bench_kernels as B
import kernels

def per_call_us(fn, calls=2000):
    for _ in range(200): fn()
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(calls): fn()
    torch.cuda.synchronize(); return (time.perf_counter() - t0) / calls * 1e6

for layout in ("tn", "nt"):
    for est in kernels.ESTIMATORS:
        if layout == "nt" and est not in ("gae", "vtrace"): continue
        args, kwargs = B.make_inputs(est, 4096, 128, layout, torch.float32, "cuda", seed=0)
        fn = getattr(kernels, est)
        call = lambda: fn(*args, **kwargs)
        eager = per_call_us(call)
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3): call()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = call()
        g.replay(); torch.cuda.synchronize()
        ref = call()
        same = all(torch.equal(a, b) for a, b in zip(out if isinstance(out, tuple) else (out,), ref if isinstance(ref, tuple) else (ref,)))
        print(f"{est:20s} {layout} eager {eager:6.1f} us  graph replay {per_call_us(g.replay):6.1f} us  same={same}", flush=True)
