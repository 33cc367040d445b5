# The session's third device call, on the rule as kept (the form that stores vs - V for 16-bit floats and
# [N, T] rows only): V-trace's correctness tests the second call's two cut shards left, in four; the
# async-walk rules, default walks and sm_90 builds; the twin's other form without next_values against the
# reference; beside the compiles of PLAN heldout2 (both versions); then PLAN heldout2 against the session's
# starting kernels (bisect_old/before, carried), one process per version, two rounds; the bf16 / float32
# ratio. Everything comes back in one archive.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
D=docs/bench/vtrace_pg
B=bisect_old/before
R=$(mktemp -d)
shard() { name=$1; shift; timeout 300 python -m pytest -q -p no:cacheprovider "$@" > $R/pytest_$name.txt 2>&1 & }
C=tests/test_kernels_correctness.py
BIG="time_shuffles or short_time_major_tiles or thread_run_tiles or successor_values_in_thread_runs"
MID="longer_time_major_tiles or four_environments or latest_first or half_float"
REST="shapes_float32 or pipelined or strided or persistent or lookback"
shard c5a $C -k "vtrace and (longer_time_major_tiles or four_environments)"
shard c5b $C -k "vtrace and (latest_first or half_float)"
shard c6a $C -k "vtrace and not ($BIG or $MID) and (shapes_float32 or pipelined or strided)"
shard c6c $C -k "vtrace and not ($BIG or $MID) and (persistent or lookback)"
shard c6b $C -k "vtrace and not ($BIG or $MID or $REST)"
shard aw_rules tests/test_async_walk.py -k "not match_the_reference"
shard aw_pg tests/test_async_walk.py -k "vtrace and pg_rho_bar"
for i in 0 1 2 3; do
  PYTHONPATH=$B:. timeout 280 python $D/cells.py heldout2 before /dev/null warm $i 4 > $R/warm_before_$i.log 2>&1 &
  timeout 280 python $D/cells.py heldout2 after /dev/null warm $i 4 > $R/warm_after_$i.log 2>&1 &
done
timeout 280 python docs/bench/four_envs/cells.py ratio after /dev/null warm 0 1 > $R/warm_ratio.log 2>&1 &
wait
for r in 1 2; do
  timeout 60 python $D/cells.py heldout2 after $R/heldout2_after_$r.json > $R/heldout2_after_$r.txt 2>&1
  PYTHONPATH=$B:. timeout 60 python $D/cells.py heldout2 before $R/heldout2_before_$r.json > $R/heldout2_before_$r.txt 2>&1
done
timeout 60 python docs/bench/four_envs/cells.py ratio after $R/ratio.json > $R/ratio.txt 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/gpu.txt
tar -C $R -cf $OUT/results.tar .
for f in $R/pytest_*.txt; do echo "=== $(basename $f .txt)"; tail -n 3 $f; done
grep -il 'fail\|error' $R/warm_*.log | head
tail -n 1 $R/heldout2_*.txt
cat $R/ratio.txt
