#!/bin/bash
# every read catalog's queries (those of catalogs.txt after Seal-Tools: the bank example and fourteen desks; then
# the hotel/lab pair), one eval each: $1 output folder, $2 PYTHONPATH dir, rest: eval options
# (SmolLM2 unless --model is given)
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 STACKROUTE_CACHE_DIR=/work/cache/stackroute PYTHONPATH=$2
O=$1; shift 2  # (the evidence-weight runs were made with an earlier form that wrote to /work/scratch)
S=/work/main/bench/results/2026-12-08-cpu-heldout-hotel-lab/scripts
mkdir -p $O; cd /tmp
(tail -n +2 $S/catalogs.txt; cat $S/catalogs-pair.txt) | while read cat qs rest; do
  n=$(basename $cat .catalog.json)
  /work/main/.venv/bin/python -m stackroute.server.cli eval $cat $qs --json "$@" > $O/$n.json 2> $O/$n.err
  echo $n done $(date +%T)
done
