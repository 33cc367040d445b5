# The session's third device call: PLAN fours for three variants of V-trace's twin, V_{t+1} from the walk's
# registers (s) or copied one step later (c), the policy-gradient terms computed before the scan (k,
# VTRACE_KEEP=1) or from the chunk read again after it (r); compiles in parallel, then one timing
# process per variant. Outputs in one archive.
export PYTHONPATH=$PWD
D=docs/bench/vtrace_async
S=$(mktemp -d); mkdir -p $S/out
variant() {
  export TRITON_CACHE_DIR=/tmp/tc_$1
  case $1 in *c*) export VTRACE_SUCC_COPIED=1;; *) unset VTRACE_SUCC_COPIED;; esac
  case $1 in *k*) export VTRACE_KEEP=1;; *) unset VTRACE_KEEP;; esac
}
for v in sr sk ck; do
  variant $v
  for i in 0 1 2 3 4; do timeout 240 python $D/tiles.py fours warm $i 5 > /dev/null 2>&1 & done
done
wait
for v in sr sk ck; do
  variant $v
  timeout 80 python $D/tiles.py fours time $S/out/fours_$v.json > $S/out/fours_$v.log 2>&1
  tail -n 1 $S/out/fours_$v.log
done
tar -C $S/out -czf $OUT/device_3.tgz .
