# The session's second device call: discounted returns' reordered twin swept, the rule held out against
# the session's starting kernels (bisect_old/before, carried), the forms, the bf16 / float32 ratio.
export PYTHONPATH=$PWD
D=docs/bench/async_returns
B=bisect_old/before
for i in 0 1 2 3 4 5; do timeout 200 python $D/stages.py discounted warm $i 6 > $OUT/warm_d_$i.txt 2>&1 & done
for i in 0 1 2 3 4; do
  PYTHONPATH=$B:. timeout 200 python $D/cells.py heldout before /dev/null warm $i 5 > /dev/null 2>&1 &
  timeout 200 python $D/cells.py heldout after /dev/null warm $i 5 > /dev/null 2>&1 &
done
wait
timeout 100 python $D/stages.py discounted time $OUT/discounted.json > $OUT/discounted.txt 2>&1
heldout() {
  PYTHONPATH=$B:. timeout 120 python $D/cells.py heldout before $OUT/heldout_before_$1.json > $OUT/heldout_before_$1.txt 2>&1
  timeout 120 python $D/cells.py heldout after $OUT/heldout_after_$1.json > $OUT/heldout_after_$1.txt 2>&1
}
heldout 1
timeout 90 python $D/options.py $OUT/options.json > $OUT/options.txt 2>&1
timeout 60 python docs/bench/four_envs/cells.py ratio after $OUT/ratio.json > $OUT/ratio.txt 2>&1
heldout 2
tail -n 2 $OUT/*.txt
