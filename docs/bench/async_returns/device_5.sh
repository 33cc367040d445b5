# The session's fifth device call: V-trace's and Retrace's twins against the float64 reference with
# CUDA tensors (seven shards by tile) and the default walks of the final rule, beside PLAN heavy's
# compiles; then PLAN heavy.
export PYTHONPATH=$PWD
D=docs/bench/async_returns
S=$(mktemp -d)
for tile in 64x64w4s2 64x64w4s3 64x64w4s4 32x64w4s6 64x32w2s4 64x128w4s3 128x64w4s3; do
  timeout 300 python -m pytest -q -p no:cacheprovider tests/test_async_walk.py \
    -k "match_the_reference and (vtrace or retrace) and $tile" > $S/ref_$tile.txt 2>&1 &
done
timeout 300 python -m pytest -q -p no:cacheprovider tests/test_async_walk.py -k "default_walk" > $S/default.txt 2>&1 &
for i in 0 1 2 3 4 5 6 7; do timeout 300 python $D/stages.py heavy warm $i 8 > /dev/null 2>&1 & done
wait
for f in $S/*.txt; do echo "=== $(basename $f .txt)"; tail -n 25 $f; done > $OUT/pytest_cuda.txt
grep -h "passed\|failed" $S/*.txt
timeout 200 python $D/stages.py heavy time $OUT/heavy.json > $OUT/heavy.txt 2>&1
tail -n 3 $OUT/heavy.txt
