# The session's fourth device call: the final rule's tests with CUDA tensors (the 128 x 64 tile against
# the reference; rules, default walks and sm_90 builds by Triton 3.6), PLAN final held out against the
# session's starting kernels (bisect_old/before, carried), PLAN long_chunks, the bf16 / float32 ratio.
# Everything comes back in one archive.
export PYTHONPATH=$PWD
D=docs/bench/async_returns
B=bisect_old/before
R=$(mktemp -d)
timeout 240 python -m pytest -q -p no:cacheprovider tests/test_async_walk.py -k "match_the_reference and 128x64w4s3" \
  > $R/pytest_ref_128x64.txt 2>&1 &
timeout 240 python -m pytest -q -p no:cacheprovider tests/test_async_walk.py -k "not match_the_reference" \
  > $R/pytest_rest.txt 2>&1 &
for i in 0 1 2 3; do
  PYTHONPATH=$B:. timeout 200 python $D/cells.py final before /dev/null warm $i 4 > /dev/null 2>&1 &
  timeout 200 python $D/cells.py final after /dev/null warm $i 4 > /dev/null 2>&1 &
done
timeout 200 python $D/stages.py long_chunks warm 0 1 > /dev/null 2>&1 &
wait
for r in 1 2; do
  PYTHONPATH=$B:. timeout 60 python $D/cells.py final before $R/final_before_$r.json > $R/final_before_$r.txt 2>&1
  timeout 60 python $D/cells.py final after $R/final_after_$r.json > $R/final_after_$r.txt 2>&1
done
timeout 60 python $D/stages.py long_chunks time $R/long_chunks.json > $R/long_chunks.txt 2>&1
timeout 60 python docs/bench/four_envs/cells.py ratio after $R/ratio.json > $R/ratio.txt 2>&1
tar -C $R -cf $OUT/results.tar .
tail -n 3 $R/*.txt
