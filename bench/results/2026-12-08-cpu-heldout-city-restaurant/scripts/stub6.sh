#!/bin/bash
# stub menus (priors, no model): stub5b.sh's half $4 (Seal-Tools dev or test and eight of the
# sixteen earlier catalogs), then the fifth pair (half 1) or this sixth pair (half 2);
# $1 tag, $2 PYTHONPATH dir, $3 output folder (run both halves at once on two cores)
B=/work/main/bench/results; M=$B/2026-12-07-cpu-none-bias/menus.py
$B/2026-12-08-cpu-heldout-hotel-lab/scripts/stub5b.sh "$1" "$2" "$3" "$4" || exit 1
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 STACKROUTE_CACHE_DIR=/work/cache/stackroute PYTHONPATH=$2
if [ "$4" = 1 ]; then P=$B/2026-12-08-cpu-heldout-hotel-lab; pair="hotel lab"
else P=$B/2026-12-08-cpu-heldout-city-restaurant; pair="city restaurant"; fi
cd /tmp
for c in $pair; do
  /work/main/.venv/bin/python $M $P/heldout-$c/$c.catalog.json $P/heldout-$c/$c.queries.jsonl $3/$1-$c.json
done
echo done
