# The session's fifth device call: V-trace's twin as committed (the experiment's switches gone) against the
# float64 reference in the walks of four environments per thread not checked in the fourth call, beside
# PLAN ranges' compiles; then PLAN ranges.
export PYTHONPATH=$PWD
D=docs/bench/vtrace_async
S=$(mktemp -d); mkdir -p $S/out
for k in "64x64w8s3" "32x64w8s4 or 64x32w4s3" "128x64w8s2" "64x128w8s2"; do
  timeout 300 python -m pytest -q -p no:cacheprovider tests/test_async_walk.py \
    -k "match_the_reference and vtrace and four_envs and ($k)" > "$S/ref_${k//[^a-z0-9]/_}.txt" 2>&1 &
done
for i in 0 1 2 3 4 5 6 7 8 9 10 11; do timeout 300 python $D/tiles.py ranges warm $i 12 > /dev/null 2>&1 & done
wait
for f in $S/ref_*.txt; do echo "=== $(basename "$f" .txt)"; tail -n 30 "$f"; done > $S/out/pytest_cuda_5.txt
grep -h "passed\|failed" $S/ref_*.txt
timeout 150 python $D/tiles.py ranges time $S/out/ranges.json > $S/out/ranges.log 2>&1
tail -n 1 $S/out/ranges.log
tar -C $S/out -czf $OUT/device_5.tgz .
