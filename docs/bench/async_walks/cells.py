"""Walks fed through shared memory (thirty-seventh session): GAE's bf16 cells outside ``walks.py``'s
sweeps, the kernels' own block shapes, through ``../explicit_layout/heldout.py``'s measurement
(device time per call from a CUDA graph, inputs rotated through four times the L2, each cell checked
against the float64 reference first), one process per version. Cells are ``(estimator, T, N, dtype)``:
six in the rule's first range (8192-8448 environments; three stages in the first rule, four in the
final one: PLAN ``first``), eight in its second (12673-25344, two stages), and controls the rule
leaves alone (12288 and 26624 environments, rows not 16 elements apart, float32 GAE, bf16 V-trace).

  PYTHONPATH=<kernels' checkout>:. python docs/bench/async_walks/cells.py PLAN TAG OUT.json [warm I K]
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

FIRST_RANGE = ((3000, 8192), (2000, 8320), (1500, 8448), (700, 8192), (6000, 8192), (300, 8448))
SECOND_RANGE = ((2048, 12800), (1500, 13312), (3000, 15360), (4000, 16000), (1800, 18432), (500, 20000),
                (1200, 22528), (1000, 25344))
CONTROLS = (("gae", 2048, 12288, "bf16"), ("gae", 1024, 26624, "bf16"), ("gae", 2048, 8200, "bf16"),
            ("gae", 4096, 8192, "f32"), ("vtrace", 4096, 8192, "bf16"))
H.PLANS["heldout"] = [("gae", T, N, "bf16") for T, N in FIRST_RANGE + SECOND_RANGE] + list(CONTROLS)
# The final rule's first range (four stages; the first rule's three were slower held out: `stages.py`).
H.PLANS["first"] = [("gae", T, N, "bf16") for T, N in FIRST_RANGE] + list(CONTROLS[:2])

if __name__ == "__main__":
    H.cli(sys.argv[1:])
