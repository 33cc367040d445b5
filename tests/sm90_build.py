"""Build estimator kernels for sm_90 without a GPU (``test_explicit_layout``; run without
``TRITON_INTERPRET``): the explicit-layout twin where the ``LaunchConfig`` says ``explicit_layout``,
the async-walk twin (with bf16 series) where it says ``async_walk``, the persistent twin where it says
``persistent`` (with look-back), else the Triton kernel in that block shape (rows latest first; thread runs and
``RUN_SUCCESSORS`` as ``_launch`` would pass them for float32). The JSON argument lists
``[estimator, LaunchConfig fields, options]``, the options ``true`` for every optional input
(``HAS_*``) and ``false`` for none (V-trace's ``PG_IS_X`` as its default call then takes it: without
them only); for each, the PTX's barrier count, the PTX, ``ptxas -v``'s
report and the SASS (``None`` when Triton finds no ``ptxas`` or ``cuobjdump``). Prints one JSON line."""

import importlib
import json
import os
import subprocess
import sys
import tempfile
from typing import Optional

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas
from triton.compiler import ASTSource
from triton.experimental.gluon._runtime import GluonASTSource

from kernels import LaunchConfig, _async_walk, _explicit_layout, _launch
from kernels._scan import FLAG_POINTERS



def kernel_of(estimator: str, config: LaunchConfig):
    """The kernel a launch in ``config`` runs: the Triton kernel, its explicit-layout, async-walk or
    persistent twin."""
    kernel = getattr(importlib.import_module(f"kernels.{estimator}"), f"_{estimator}_kernel")
    if config.async_walk:
        return _async_walk.TWINS[kernel]
    if config.persistent and config.lookback:
        return _launch.PERSISTENT_TWINS[kernel]
    return _explicit_layout.TWINS[kernel] if config.explicit_layout else kernel


def specialisation(kernel, constexprs: dict, float_type: str = "fp32",
                   time_contiguous: bool = False) -> tuple[dict, dict, dict]:
    """``triton.compile``'s signature, constants and attributes of ``kernel`` as a contiguous ``[T, N]``
    launch specialises it (``time_contiguous``: ``[N, T]``): its constexprs from ``constexprs`` by name,
    unit environment (time) strides, 16-divisible row strides and pointers, flags as bytes and float
    series as ``float_type``."""
    unit, rows, row_length = ("_t", "_n", "T") if time_contiguous else ("_n", "_t", "N")
    signature, constants, attrs = {}, {}, {}
    for i, param in enumerate(kernel.params):
        name = param.name
        if param.is_constexpr:
            signature[name], constants[(i,)] = "constexpr", constexprs[name]
        elif (name.startswith("s_") and name.endswith(unit)) or name in ("s_boot", "s_init"):
            signature[name], constants[(i,)] = "constexpr", 1
        elif name.endswith("_ptr") or name in ("ws", "flags"):
            signature[name] = ("*u8" if name in FLAG_POINTERS else "*i32" if name == "flags"
                               else "*fp32" if name == "ws" else f"*{float_type}")
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            signature[name] = "i32"
            if name == row_length or (name.startswith("s_") and name.endswith(rows)):
                attrs[(i,)] = [["tt.divisibility", 16]]
    return signature, constants, attrs


def build(estimator: str, config: LaunchConfig, options: bool, overrides: Optional[dict] = None) -> dict:
    """The kernel as a contiguous float32 (async walks: bf16) ``[T, N]`` launch specialises it (unit
    environment strides, 16-divisible row strides and pointers), reverse where it may be; ``overrides``
    replaces constexprs by name (e.g. ``HAS_TRUNC`` with ``PG_IS_X``)."""
    kernel = kernel_of(estimator, config)
    float_type = "bf16" if config.async_walk else "fp32"
    if config.async_walk:
        time_threads, source = _launch._time_threads(config, False, 2), GluonASTSource
    elif config.explicit_layout:
        time_threads, source = _explicit_layout.time_threads(config.block_t, config.num_warps), GluonASTSource
    else:
        time_threads, source = _launch.time_threads(config, 4) if config.thread_runs else 1, ASTSource
    lookback = _launch.lookback_window(config.block_n, n_blocks=2, num_chunks=64) if config.lookback else 0
    values = dict(ACC=tl.float32, BLOCK_T=config.block_t, BLOCK_N=config.block_n, LOOKBACK=lookback,
                  NUM_STAGES=config.num_stages, SHUFFLE_TIME=0, LATEST_FIRST=not config.explicit_layout,
                  STARTS_AT=False, REVERSE=True, TIME_THREADS=time_threads, ENV_RUNS_OF_FOUR=config.env_runs_of_four,
                  RUN_SUCCESSORS=_launch.successors_from_runs(config, 4, config.lookback))
    values.update({param.name: options for param in kernel.params if param.name.startswith("HAS_")})
    values.update(PG_IS_X=not options)
    values.update(overrides or {})
    signature, constants, attrs = specialisation(kernel, values, float_type)
    return compile_for_sm90(source(fn=kernel, signature=signature, constexprs=constants, attrs=attrs),
                            config.num_warps, config.num_stages)


def compile_for_sm90(source, num_warps: int, num_stages: int = 3) -> dict:
    """``source`` (a Triton or Gluon AST source) compiled for sm_90 and assembled by Triton's ``ptxas``:
    the PTX's barrier count, the PTX, ``ptxas -v``'s report and the SASS (``None`` without the tools)."""
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    ptx = compiled.asm["ptx"]
    ptxas = get_ptxas(90).path  # the ptxas Triton itself assembles sm_90 code with
    cuobjdump = os.path.join(os.path.dirname(ptxas or ""), "cuobjdump")
    report = sass = None
    if ptxas and os.path.exists(ptxas):
        with tempfile.TemporaryDirectory() as tmp:
            path, cubin = os.path.join(tmp, "kernel.ptx"), os.path.join(tmp, "kernel.cubin")
            with open(path, "w") as f:
                f.write(ptx)
            report = subprocess.run([ptxas, "-v", "-arch=sm_90a", path, "-o", cubin],
                                    capture_output=True, text=True).stderr
            if os.path.exists(cuobjdump):
                sass = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True).stdout
    return {"barriers": ptx.count("bar.sync"), "ptx": ptx, "ptxas": report, "sass": sass}


if __name__ == "__main__":
    print(json.dumps([[estimator, fields, options, build(estimator, LaunchConfig(*fields), options)]
                      for estimator, fields, options in json.loads(sys.argv[1])]))
