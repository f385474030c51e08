#!/bin/bash
# stub menus for the legal and fleet desks; $1 tag, $2 PYTHONPATH
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 STACKROUTE_CACHE_DIR=/work/cache/stackroute PYTHONPATH=$2
B=/work/main/bench/results; M=$B/2026-12-07-cpu-none-bias/menus.py; O=/work/scratch/s52/stub
P=$B/2026-12-07-cpu-heldout-legal-fleet; PY=/work/main/.venv/bin/python
cd /tmp
for c in legal fleet; do $PY $M $P/heldout-$c/$c.catalog.json $P/heldout-$c/$c.queries.jsonl $O/$1-$c.json; done
