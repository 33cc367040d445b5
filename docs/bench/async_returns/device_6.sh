# The session's sixth device call: the rules, default walks and sm_90 builds (Triton 3.6) with Retrace's
# twin in the rule, beside PLAN retrace's compiles; PLAN retrace held out against the session's starting
# kernels (bisect_old/before, carried), the forms of Retrace and GAE, the bf16 / float32 ratio.
# Everything comes back in one archive.
export PYTHONPATH=$PWD
D=docs/bench/async_returns
B=bisect_old/before
R=$(mktemp -d)
timeout 240 python -m pytest -q -p no:cacheprovider tests/test_async_walk.py -k "not match_the_reference" \
  > $R/pytest_rest.txt 2>&1 &
for i in 0 1 2 3; do
  PYTHONPATH=$B:. timeout 200 python $D/cells.py retrace before /dev/null warm $i 4 > /dev/null 2>&1 &
  timeout 200 python $D/cells.py retrace after /dev/null warm $i 4 > /dev/null 2>&1 &
done
wait
for r in 1 2; do
  PYTHONPATH=$B:. timeout 60 python $D/cells.py retrace before $R/retrace_before_$r.json > $R/retrace_before_$r.txt 2>&1
  timeout 60 python $D/cells.py retrace after $R/retrace_after_$r.json > $R/retrace_after_$r.txt 2>&1
done
timeout 90 python $D/options.py retrace $R/options_retrace.json > $R/options_retrace.txt 2>&1
timeout 60 python docs/bench/four_envs/cells.py ratio after $R/ratio.json > $R/ratio.txt 2>&1
tar -C $R -cf $OUT/results.tar .
tail -n 2 $R/*.txt
