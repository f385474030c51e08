#!/bin/bash
# held-out baseline at 02d481e (worktree), before anyone reads the results
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 STACKROUTE_CACHE_DIR=/work/cache/stackroute PYTHONPATH=/tmp/wtpath
R=/work/main/bench/results/2026-12-07-cpu-heldout-insurance-telecom
M=$1; shift
for c in insurance telecom; do
  /work/main/.venv/bin/python -m stackroute.server.cli eval $R/heldout-$c/$c.catalog.json $R/heldout-$c/$c.queries.jsonl --json "$@" > $R/heldout-$c/$c-$M-02d481e.json 2> /work/scratch/s51/base-$c-$M.err
done
