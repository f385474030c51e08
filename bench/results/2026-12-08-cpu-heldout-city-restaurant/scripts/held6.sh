#!/bin/bash
# sixth held-out pair; $1 tag (commit), $2 PYTHONPATH dir, $3 model tag, $4 catalog, rest: eval options
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 STACKROUTE_CACHE_DIR=/work/cache/stackroute PYTHONPATH=$2
T=$1; M=$3; c=$4; shift 4
R=/work/main/bench/results/2026-12-08-cpu-heldout-city-restaurant
mkdir -p /work/scratch/s54/held6
cd /tmp
/work/main/.venv/bin/python -m stackroute.server.cli eval $R/heldout-$c/$c.catalog.json $R/heldout-$c/$c.queries.jsonl --json "$@" > $R/heldout-$c/$c-$M-$T.json 2> /work/scratch/s54/held6/$c-$M-$T.err
