# Plan for the second call (after the rule from the sweep is in kernels/vtrace.py; bisect_old/before a checkout of
# the kernels before it, carried): V-trace's correctness tests with CUDA tensors in shards beside the compiles of
# PLAN heldout (both versions), then PLAN heldout, one process per version, two rounds.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
D=docs/bench/vtrace_f32_form
B=bisect_old/before
R=$(mktemp -d)
shard() { name=$1; shift; timeout 290 python -m pytest -q -p no:cacheprovider "$@" > $R/pytest_$name.txt 2>&1 & }
C=tests/test_kernels_correctness.py
shard c1 $C -k "vtrace and (time_shuffles or short_time_major_tiles)"
shard c2 $C -k "vtrace and (thread_run_tiles or successor_values_in_thread_runs)"
shard c3 $C -k "vtrace and not (time_shuffles or short_time_major_tiles or thread_run_tiles or successor_values_in_thread_runs)"
shard c4 tests/test_explicit_layout.py tests/test_lookback.py tests/test_tune.py tests/test_reference.py \
  tests/test_async_walk.py -k vtrace
PYTHONPATH=$B:. timeout 280 python $D/cells.py heldout before /dev/null > $R/warm_before.log 2>&1 &
timeout 280 python $D/cells.py heldout after /dev/null > $R/warm_after.log 2>&1 &
wait
for r in 1 2; do
  timeout 120 python $D/cells.py heldout after $R/heldout_after_$r.json > $R/heldout_after_$r.txt 2>&1
  PYTHONPATH=$B:. timeout 120 python $D/cells.py heldout before $R/heldout_before_$r.json > $R/heldout_before_$r.txt 2>&1
done
tar -C $R -cf $OUT/results.tar .
for f in $R/pytest_*.txt; do echo "=== $(basename $f .txt)"; tail -n 3 $f; done
tail -n 1 $R/heldout_*.txt
