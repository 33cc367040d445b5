# The session's fourth device call: PLAN nt_forms (float32 [N, T] rows not 16 elements apart beside rows
# that are, the two forms of the kernel in one process), compiled in parallel first.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
D=docs/bench/vtrace_pg
R=$(mktemp -d)
for i in 0 1 2 3 4 5; do timeout 100 python $D/cells.py nt_forms after /dev/null warm $i 6 > $R/warm_$i.log 2>&1 & done
wait
timeout 60 python $D/cells.py nt_forms after $R/nt_forms.json > $R/nt_forms.txt 2>&1
tar -C $R -cf $OUT/results.tar .
grep -il 'fail\|error' $R/warm_*.log | head
cut -c1-140 $R/nt_forms.txt
