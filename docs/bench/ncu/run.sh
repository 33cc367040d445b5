# Nsight Compute profiles of one call per cell (prof.py in ../unpipelined_walks), before this
# session's kernel changes; the details pages are det<i>.txt, i = the line of the cell list below.
set -o pipefail; export PYTHONUNBUFFERED=1
i=0
while read -r cell; do
  i=$((i+1))
  ncu --clock-control none --profile-from-start off --set full --import-source no -k regex:'^_' -o $OUT/ncu/p$i \
      python3 docs/bench/unpipelined_walks/prof.py $cell
  ncu -i $OUT/ncu/p$i.ncu-rep --page details > $OUT/ncu/det$i.txt
done <<CELLS
gae 8192 4096 tn
gae 8192 4096 tn 16 16 2 0 3
gae 512 8192 tn
lambda_returns 8192 4096 nt
discounted_returns 8192 4096 nt
gae 8192 4096 nt
gae 4096 128 tn
CELLS
