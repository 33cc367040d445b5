# The session's eighth device call: V-trace's float32 correctness tests without truncations in tiles and
# time shuffles (the seventh call's shard that ran out of time), in four shards.
export PYTHONPATH=$PWD
R=$(mktemp -d)
B="vtrace and not bf16 and not truncated and (tiles or shuffles)"
i=0
for k in "(half_float or latest_first or many_small)" "(longer_time_major or four_environments)" \
         "(short_time_major or persistent)" "(thread_run_tiles or time_shuffles)"; do
  i=$((i + 1))
  timeout 170 python -m pytest -q -p no:cacheprovider tests/test_kernels_correctness.py -k "$B and $k" \
    > $R/pytest_b1_$i.txt 2>&1 &
done
wait
for f in $R/*.txt; do echo "=== $(basename $f .txt)"; tail -n 5 $f; done > $OUT/pytest_cuda_8.txt
cat $OUT/pytest_cuda_8.txt
