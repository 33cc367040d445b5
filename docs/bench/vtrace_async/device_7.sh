# The session's seventh device call, after the rule dropped its range from 16897 to 25344 environments:
# the rules, default walks and sm_90 builds (Triton 3.6) of test_async_walk.py, and the shards of the sixth
# call's tests that ran out of time there (V-trace's float32 correctness tests without truncations, the
# explicit-layout twins: shift_in's new name), in shards. Everything comes back in one archive.
export PYTHONPATH=$PWD
R=$(mktemp -d)
shard() { name=$1; shift; timeout 280 python -m pytest -q -p no:cacheprovider "$@" > $R/pytest_$name.txt 2>&1 & }
shard rest tests/test_async_walk.py -k "not match_the_reference"
shard corr_b1 tests/test_kernels_correctness.py -k "vtrace and not bf16 and not truncated and (tiles or shuffles)"
shard corr_b2 tests/test_kernels_correctness.py -k "vtrace and not bf16 and not truncated and not (tiles or shuffles)"
shard explicit_1 tests/test_explicit_layout.py -k "twin_matches_the_reference and gae"
shard explicit_2 tests/test_explicit_layout.py -k "twin_matches_the_reference and (retrace or lambda)"
shard explicit_3 tests/test_explicit_layout.py -k "twin_matches_the_reference and not (gae or retrace or lambda or vtrace)"
shard explicit_4 tests/test_explicit_layout.py -k "not twin_matches_the_reference and not vtrace"
wait
tar -C $R -cf $OUT/results.tar .
tail -n 2 $R/*.txt
