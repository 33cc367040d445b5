# Plan for a session with a GPU (written in the forty-first session, not yet run): PLAN ablation with the kernels
# as they are and with whole_rows.patch applied to a copy. GAE's CUDA tests on the patched copy run beside the
# compiles; then the timing runs alone, one process per version, two rounds. Everything comes back in one
# archive. rl-triton joins the ablation when its source is first on PYTHONPATH (RLT=<its src>; not carried by
# default).
export PYTHONUNBUFFERED=1
D=docs/bench/few_rows
R=$(mktemp -d)
P=$(mktemp -d)
cp -r kernels tests scripts $P/ && patch -s -p1 -d $P < $D/whole_rows.patch || exit 1
(cd $P && PYTHONPATH=$P timeout 290 python -m pytest -q -p no:cacheprovider tests/test_kernels_correctness.py \
  tests/test_kernels_identities.py tests/test_lookback.py -k gae > $R/pytest_patched.txt 2>&1) &
(cd $P && PYTHONPATH=$P timeout 290 python -m pytest -q -p no:cacheprovider tests/test_explicit_layout.py \
  tests/test_async_walk.py tests/test_tune.py tests/test_replay.py tests/test_captured.py -k gae \
  > $R/pytest_patched_rest.txt 2>&1) &
PYTHONPATH=$PWD timeout 290 python $D/rows.py ablation /dev/null > $R/warm_head.txt 2>&1 &  # compiles
PYTHONPATH=$P:$PWD timeout 290 python $D/rows.py ablation /dev/null > $R/warm_patched.txt 2>&1 &
wait
for r in 1 2; do  # nothing else on the GPU from here
  PYTHONPATH=${RLT:+$RLT:}$PWD timeout 150 python $D/rows.py ablation $R/head_$r.json > $R/head_$r.txt 2>&1
  PYTHONPATH=${RLT:+$RLT:}$P:$PWD timeout 150 python $D/rows.py ablation $R/patched_$r.json > $R/patched_$r.txt 2>&1
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
tar -C $R -cf $OUT/results.tar .
for f in $R/pytest_*.txt; do echo "=== $(basename $f .txt)"; tail -n 3 $f; done
cat $R/head_2.txt $R/patched_2.txt
