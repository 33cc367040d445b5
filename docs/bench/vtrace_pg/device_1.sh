# The session's first device call: V-trace's async-walk tests with CUDA tensors (its twin against the
# reference in every tile and form, the rules, default walks and sm_90 builds) beside the compiles of
# PLAN heldout (both versions) and PLAN tiles; then PLAN heldout against the session's starting kernels
# (bisect_old/before, carried), two rounds, one process per version; PLAN tiles; the bf16 / float32 ratio.
# Everything comes back in one archive.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
D=docs/bench/vtrace_pg
B=bisect_old/before
R=$(mktemp -d)
shard() { name=$1; shift; timeout 280 python -m pytest -q -p no:cacheprovider "$@" > $R/pytest_$name.txt 2>&1 & }
M="vtrace and match_the_reference"
shard aw_a tests/test_async_walk.py -k "$M and not four_envs and (64x64w4s2 or 64x64w4s3 or 64x64w4s4)"
shard aw_b tests/test_async_walk.py -k "$M and not four_envs and not (64x64w4s2 or 64x64w4s3 or 64x64w4s4)"
shard aw_c tests/test_async_walk.py -k "$M and four_envs and (128x64w8s2 or 64x128w8s2)"
shard aw_d tests/test_async_walk.py -k "$M and four_envs and not (128x64w8s2 or 64x128w8s2)"
shard aw_rest tests/test_async_walk.py -k "not match_the_reference"
for i in 0 1 2 3; do
  PYTHONPATH=$B:. timeout 270 python $D/cells.py heldout before /dev/null warm $i 4 > $R/warm_before_$i.log 2>&1 &
  timeout 270 python $D/cells.py heldout after /dev/null warm $i 4 > $R/warm_after_$i.log 2>&1 &
done
for i in 0 1; do timeout 270 python $D/cells.py tiles warm /dev/null warm $i 2 > $R/warm_tiles_$i.log 2>&1 & done
timeout 270 python docs/bench/four_envs/cells.py ratio after /dev/null warm 0 1 > $R/warm_ratio.log 2>&1 &
wait
for r in 1 2; do
  timeout 100 python $D/cells.py heldout after $R/heldout_after_$r.json > $R/heldout_after_$r.txt 2>&1
  PYTHONPATH=$B:. timeout 100 python $D/cells.py heldout before $R/heldout_before_$r.json > $R/heldout_before_$r.txt 2>&1
done
timeout 90 python $D/cells.py tiles time $R/tiles.json > $R/tiles.log 2>&1
timeout 90 python docs/bench/four_envs/cells.py ratio after $R/ratio.json > $R/ratio.txt 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/gpu.txt
tar -C $R -cf $OUT/results.tar .
for f in $R/pytest_*.txt; do echo "=== $(basename $f .txt)"; tail -n 3 $f; done
tail -n 3 $R/warm_*.log | grep -i -B1 fail | head
cat $R/heldout_after_1.txt $R/heldout_before_1.txt $R/tiles.log $R/ratio.txt | cut -c1-150
