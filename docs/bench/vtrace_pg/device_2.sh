# The session's second device call: V-trace's correctness tests with CUDA tensors (every tile kind, both
# forms of the policy-gradient advantages) in seven shards, beside the compiles of PLAN rules (both
# versions); then PLAN rules, the session's kernels and its starting ones (bisect_old/before, carried), one
# process per version, two rounds. Everything comes back in one archive.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
D=docs/bench/vtrace_pg
B=bisect_old/before
R=$(mktemp -d)
shard() { name=$1; shift; timeout 290 python -m pytest -q -p no:cacheprovider "$@" > $R/pytest_$name.txt 2>&1 & }
C=tests/test_kernels_correctness.py
BIG="time_shuffles or short_time_major_tiles or thread_run_tiles or successor_values_in_thread_runs"
MID="longer_time_major_tiles or four_environments or latest_first or half_float"
shard c1 $C -k "vtrace and time_shuffles"
shard c2 $C -k "vtrace and short_time_major_tiles"
shard c3 $C -k "vtrace and thread_run_tiles"
shard c4 $C -k "vtrace and successor_values_in_thread_runs"
shard c5 $C -k "vtrace and ($MID)"
shard c6 $C -k "vtrace and not ($BIG or $MID)"
shard c7 tests/test_explicit_layout.py tests/test_kernels_errors.py tests/test_kernels_identities.py \
  tests/test_captured.py tests/test_replay.py tests/test_lookback.py tests/test_tune.py tests/test_reference.py -k vtrace
for i in 0 1 2 3 4; do
  PYTHONPATH=$B:. timeout 280 python $D/cells.py rules before /dev/null warm $i 5 > $R/warm_before_$i.log 2>&1 &
  timeout 280 python $D/cells.py rules after /dev/null warm $i 5 > $R/warm_after_$i.log 2>&1 &
done
wait
for r in 1 2; do
  timeout 90 python $D/cells.py rules after $R/rules_after_$r.json > $R/rules_after_$r.txt 2>&1
  PYTHONPATH=$B:. timeout 90 python $D/cells.py rules before $R/rules_before_$r.json > $R/rules_before_$r.txt 2>&1
done
tar -C $R -cf $OUT/results.tar .
for f in $R/pytest_*.txt; do echo "=== $(basename $f .txt)"; tail -n 3 $f; done
grep -il 'fail\|error' $R/warm_*.log | head
tail -n 1 $R/rules_*.txt
