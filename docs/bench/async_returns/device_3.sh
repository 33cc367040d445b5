# The session's third device call: the CUDA tests of the twins and of lambda and discounted returns
# (thirteen shards beside the sweep's compiles), then PLAN more, the forms and the bf16 / float32
# ratio on the final rule. At most eight files come back: the shards' logs are joined into one.
export PYTHONPATH=$PWD
D=docs/bench/async_returns
S=$(mktemp -d)
shard() { name=$1; shift; timeout 420 python -m pytest -q -p no:cacheprovider "$@" > $S/$name.txt 2>&1 & }
for tile in 64x64w4s2 64x64w4s3 64x64w4s4 32x64w4s6 64x32w2s4 64x128w4s3; do
  shard ref_$tile tests/test_async_walk.py -k "match_the_reference and $tile"
done
shard async_rest tests/test_async_walk.py -k "not match_the_reference"
shard corr_lambda tests/test_kernels_correctness.py -k "lambda_returns"
shard corr_disc_a tests/test_kernels_correctness.py -k "discounted_returns and (bf16 or truncated)"
shard corr_disc_b tests/test_kernels_correctness.py -k "discounted_returns and not (bf16 or truncated)"
shard others tests/test_kernels_errors.py tests/test_kernels_identities.py tests/test_captured.py tests/test_replay.py \
  -k "lambda or discounted"
shard explicit tests/test_explicit_layout.py -k "lambda or discounted"
shard tune tests/test_tune.py -k "lambda or discounted"
for i in 0 1; do timeout 300 python $D/stages.py more warm $i 2 > /dev/null 2>&1 & done
wait
for f in $S/*.txt; do echo "=== $(basename $f .txt)"; tail -n 15 $f; done > $OUT/pytest_cuda.txt
grep -h "passed\|failed" $S/*.txt
timeout 120 python $D/stages.py more time $OUT/more.json > $OUT/more.txt 2>&1
timeout 90 python $D/options.py $OUT/options.json > $OUT/options.txt 2>&1
timeout 60 python docs/bench/four_envs/cells.py ratio after $OUT/ratio.json > $OUT/ratio.txt 2>&1
tail -n 3 $OUT/more.txt $OUT/options.txt $OUT/ratio.txt
