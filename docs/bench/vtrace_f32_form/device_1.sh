# Plan for a session with a GPU (written in the forty-first session, not yet run). PLAN sweep: the compiles
# in eight processes, then the timing in one; everything comes back in one archive.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
D=docs/bench/vtrace_f32_form
R=$(mktemp -d)
for i in 0 1 2 3 4 5 6 7; do
  timeout 300 python $D/cells.py sweep warm $i 8 > $R/warm_$i.log 2>&1 &
done
wait
timeout 280 python $D/cells.py sweep time $R/sweep.json > $R/sweep.log 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/gpu.txt
tar -C $R -cf $OUT/results.tar .
grep -h FAIL $R/warm_*.log | head
tail -n 3 $R/sweep.log
