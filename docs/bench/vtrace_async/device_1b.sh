export PYTHONPATH=$PWD
D=docs/bench/vtrace_async
S=$(mktemp -d); mkdir -p $S/out
for v in s c; do
  export TRITON_CACHE_DIR=/tmp/tc_$v
  [ $v = c ] && export VTRACE_SUCC_COPIED=1 || unset VTRACE_SUCC_COPIED
  for i in 0 1 2 3 4 5 6 7; do timeout 200 python $D/tiles.py tiles warm $i 8 > /dev/null 2>&1 & done
done
wait
for v in s c; do
  export TRITON_CACHE_DIR=/tmp/tc_$v
  [ $v = c ] && export VTRACE_SUCC_COPIED=1 || unset VTRACE_SUCC_COPIED
  timeout 180 python $D/tiles.py tiles time $S/out/tiles_$v.json > $S/out/tiles_$v.log 2>&1
  tail -n 2 $S/out/tiles_$v.log
done
tar -C $S/out -czf $OUT/device_1b.tgz .
