# The session's sixth device call: the rule's tests with CUDA tensors (the rules, default walks and sm_90
# builds of test_async_walk.py; V-trace's correctness, error, identity, captured-call, replay,
# explicit-layout and tune tests) beside PLAN heldout's compiles; PLAN heldout against the session's
# starting kernels (bisect_old/before, carried), two rounds; V-trace's forms; the bf16 / float32 ratio.
# Everything comes back in one archive.
export PYTHONPATH=$PWD
D=docs/bench/vtrace_async
B=bisect_old/before
R=$(mktemp -d)
shard() { name=$1; shift; timeout 300 python -m pytest -q -p no:cacheprovider "$@" > $R/pytest_$name.txt 2>&1 & }
shard rest tests/test_async_walk.py -k "not match_the_reference"
shard corr_bf16 tests/test_kernels_correctness.py -k "vtrace and bf16"
shard corr_a tests/test_kernels_correctness.py -k "vtrace and not bf16 and truncated"
shard corr_b tests/test_kernels_correctness.py -k "vtrace and not bf16 and not truncated"
shard explicit tests/test_explicit_layout.py -k "not vtrace"
shard others tests/test_kernels_errors.py tests/test_kernels_identities.py tests/test_captured.py tests/test_replay.py \
  tests/test_explicit_layout.py tests/test_tune.py -k vtrace
for i in 0 1 2 3 4; do
  PYTHONPATH=$B:. timeout 240 python $D/cells.py heldout before /dev/null warm $i 5 > /dev/null 2>&1 &
  timeout 240 python $D/cells.py heldout after /dev/null warm $i 5 > /dev/null 2>&1 &
done
wait
for r in 1 2; do
  PYTHONPATH=$B:. timeout 60 python $D/cells.py heldout before $R/heldout_before_$r.json > $R/heldout_before_$r.txt 2>&1
  timeout 60 python $D/cells.py heldout after $R/heldout_after_$r.json > $R/heldout_after_$r.txt 2>&1
done
timeout 90 python docs/bench/async_returns/options.py vtrace $R/options_vtrace.json > $R/options_vtrace.txt 2>&1
timeout 60 python docs/bench/four_envs/cells.py ratio after $R/ratio.json > $R/ratio.txt 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/gpu.txt
tar -C $R -cf $OUT/results.tar .
tail -n 2 $R/*.txt
