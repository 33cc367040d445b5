"""The scan engine shared by every fused estimator.

Every estimator is the first-order linear recurrence ``y_t = alpha_t + beta_t * y_prev``, where
``y_prev`` is ``y_{t+1}`` for a reverse recurrence and ``y_{t-1}`` for a forward one. The pair
``(alpha_t, beta_t)`` is the affine map ``y -> alpha_t + beta_t y``; composing maps is associative,

    (a1, b1) then (a2, b2) = (a2 + b2 a1, b1 b2),

so a tile of pairs is solved by ``tl.associative_scan`` with that one operator (``affine_then``).
An estimator's kernel loads its inputs as tiles (``tiles``), builds its ``(alpha, beta)`` from them,
and hands them to ``scan_chunk`` (``walk``), which applies the carry from the previous chunk, or
from the earlier tiles by decoupled look-back (``lookback``) when tiles are programs of their own.

Every kernel takes ``(*series, ws, flags, T, N, *coefficient halves, *its own constexprs, ACC,
BLOCK_T, BLOCK_N, LOOKBACK, NUM_STAGES, LATEST_FIRST, RUN)``; ``kernels.launch.launch`` fills the
trailing constexprs from a ``LaunchConfig``.
"""

from kernels.scan.lookback import carry_in
from kernels.scan.tiles import (affine_then, chunk_times, coefficient_kernel, edge_row, envs, fast_exp,
                                in_runs_of_four, load_env, load_flags, load_tile, run_position, scalar, store_tile,
                                tile_mask, tile_pointers, wide)
from kernels.scan.walk import (affine_then_with_previous, program_chunks, scan_chunk, scan_chunk_with_next, scan_runs,
                               scan_runs_with_previous)

__all__ = ["affine_then", "affine_then_with_previous", "carry_in", "chunk_times", "coefficient_kernel", "edge_row",
           "envs", "fast_exp", "in_runs_of_four", "load_env", "load_flags", "load_tile", "program_chunks",
           "run_position", "scalar", "scan_chunk", "scan_chunk_with_next", "scan_runs", "scan_runs_with_previous",
           "store_tile", "tile_mask", "tile_pointers", "wide"]
