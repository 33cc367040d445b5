# The session's first device call: the twins against the float64 reference with CUDA tensors (six
# shards by tile, beside the sweep's compiles), then the sweep. Writes under $OUT.
export PYTHONPATH=$PWD
D=docs/bench/async_returns
python -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" > $OUT/gpu.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/gpu.txt
for tile in 64x64w4s2 64x64w4s3 64x64w4s4 32x64w4s6 64x32w2s4 64x128w4s3; do
  timeout 330 python -m pytest -q -p no:cacheprovider tests/test_async_walk.py -k "match_the_reference and $tile" \
    > $OUT/pytest_ref_$tile.txt 2>&1 &
done
for i in 0 1 2 3 4 5 6 7; do timeout 330 python $D/stages.py stages warm $i 8 > $OUT/warm_$i.txt 2>&1 & done
wait
tail -n 2 $OUT/pytest_ref_*.txt; cat $OUT/warm_*.txt | grep -v "^$" | head
timeout 230 python $D/stages.py stages time $OUT/stages.json > $OUT/stages.log 2>&1
tail -n 3 $OUT/stages.log
