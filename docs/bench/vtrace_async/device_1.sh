# The session's first device call: V-trace's twin, its successor values V_{t+1} from the walk's own
# registers (variant s) or copied one step later (variant c, VTRACE_SUCC_COPIED=1), against the float64
# reference with CUDA tensors (shards by tile) beside PLAN tiles' compiles; then PLAN tiles, one
# process per variant. Outputs in one archive.
export PYTHONPATH=$PWD
D=docs/bench/vtrace_async
S=$(mktemp -d)
for v in s c; do
  export TRITON_CACHE_DIR=$S/cache_$v
  [ $v = c ] && export VTRACE_SUCC_COPIED=1 || unset VTRACE_SUCC_COPIED
  for tile in 64x64w4s2 64x64w4s3 64x64w4s4 "32x64w4s6 or 64x32w2s4" "64x128w4s3 or 128x64w4s3"; do
    timeout 270 python -m pytest -q -p no:cacheprovider tests/test_async_walk.py \
      -k "match_the_reference and vtrace and ($tile)" > "$S/ref_${v}_${tile// /_}.txt" 2>&1 &
  done
  for i in 0 1 2; do timeout 270 python $D/tiles.py tiles warm $i 3 > /dev/null 2>&1 & done
done
wait
mkdir -p $S/out
for f in $S/ref_*.txt; do echo "=== $(basename "$f" .txt)"; tail -n 30 "$f"; done > $S/out/pytest_cuda_1.txt
grep -h "passed\|failed" $S/ref_*.txt
for v in s c; do
  export TRITON_CACHE_DIR=$S/cache_$v
  [ $v = c ] && export VTRACE_SUCC_COPIED=1 || unset VTRACE_SUCC_COPIED
  timeout 150 python $D/tiles.py tiles time $S/out/tiles_$v.json > $S/out/tiles_$v.log 2>&1
  tail -n 2 $S/out/tiles_$v.log
done
tar -C $S/out -czf $OUT/device_1.tgz .
