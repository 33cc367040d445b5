# The session's fourth device call: V-trace's twin (V_{t+1} from the walk's registers, the chunk read again
# after the scan) against the float64 reference in walks of four environments per thread, and every twin in
# two tiles after walk_layout's change, beside PLAN deep's compiles; then PLAN deep.
export PYTHONPATH=$PWD
D=docs/bench/vtrace_async
S=$(mktemp -d); mkdir -p $S/out
export TRITON_CACHE_DIR=/tmp/tc_final
for k in "vtrace and four_envs and (128x64w8s2 or 64x128w8s2)" "vtrace and True and (64x64w8s3 or 32x64w8s4 or 64x32w4s3)" \
         "not vtrace and 64x64w4s2" "not vtrace and 64x128w4s3"; do
  timeout 300 python -m pytest -q -p no:cacheprovider tests/test_async_walk.py \
    -k "match_the_reference and $k" > "$S/ref_${k//[^a-z0-9]/_}.txt" 2>&1 &
done
for i in 0 1 2 3 4 5 6 7 8 9 10 11; do timeout 300 python $D/tiles.py deep warm $i 12 > /dev/null 2>&1 & done
wait
for f in $S/ref_*.txt; do echo "=== $(basename "$f" .txt)"; tail -n 30 "$f"; done > $S/out/pytest_cuda_4.txt
grep -h "passed\|failed" $S/ref_*.txt
timeout 150 python $D/tiles.py deep time $S/out/deep.json > $S/out/deep.log 2>&1
tail -n 1 $S/out/deep.log
tar -C $S/out -czf $OUT/device_4.tgz .
