#!/bin/bash
# SmolLM2 priors on Seal-Tools gold leaves; $1 tag, $2 PYTHONPATH dir holding stackroute -> worktree
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 STACKROUTE_CACHE_DIR=/work/cache/stackroute PYTHONPATH=$2
cd /tmp
for s in dev test test-ood; do /work/main/.venv/bin/python -m stackroute.bench.cli right-call --split $s --limit 200 --methods priors --out /work/scratch/s52/priors-$1/$s > /work/scratch/s52/priors-$1-$s.log 2>&1; done
echo done > /work/scratch/s52/priors-$1.done
