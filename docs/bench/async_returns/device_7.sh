# The session's seventh device call: Retrace's correctness, error, identity, captured-call, replay,
# explicit-layout and tune tests with CUDA tensors (its pairs gained an unmasked form; four shards),
# then discounted returns' forms in its 128 x 64 range. Everything comes back in one archive.
export PYTHONPATH=$PWD
D=docs/bench/async_returns
R=$(mktemp -d)
shard() { name=$1; shift; timeout 330 python -m pytest -q -p no:cacheprovider "$@" > $R/$name.txt 2>&1 & }
shard corr_bf16 tests/test_kernels_correctness.py -k "retrace and bf16"
shard corr_a tests/test_kernels_correctness.py -k "retrace and not bf16 and truncated"
shard corr_b tests/test_kernels_correctness.py -k "retrace and not bf16 and not truncated"
shard others tests/test_kernels_errors.py tests/test_kernels_identities.py tests/test_captured.py tests/test_replay.py \
  tests/test_explicit_layout.py tests/test_tune.py -k retrace
wait
timeout 90 python $D/options.py discounted_first $R/options_discounted_first.json > $R/options_discounted_first.txt 2>&1
tar -C $R -cf $OUT/results.tar .
tail -n 2 $R/*.txt
