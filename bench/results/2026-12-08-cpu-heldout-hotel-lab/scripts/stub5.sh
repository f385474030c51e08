#!/bin/bash
# the value menus a stub answers by its priors (no model) on Seal-Tools dev/test and the sixteen
# earlier catalogs (all read): $1 tag, $2 PYTHONPATH dir, $3 output folder
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 STACKROUTE_CACHE_DIR=/work/cache/stackroute PYTHONPATH=$2
B=/work/main/bench/results; M=$B/2026-12-07-cpu-none-bias/menus.py; O=$3; mkdir -p $O
PY=/work/main/.venv/bin/python
cd /tmp
for s in dev test; do $PY $M $s $O/$1-$s.json; done
R=$B/2026-12-07-cpu-unseen-travel-clinic; U=$B/2026-12-06-cpu-unseen-itops
for c in travel clinic; do $PY $M $R/$c.catalog.json $R/$c.queries.jsonl $O/$1-$c.json; done
$PY $M $U/itops.catalog.json $U/itops.queries.jsonl $O/$1-itops.json
$PY $M $U/heldout/shopops.catalog.json $U/heldout/shopops.queries.jsonl $O/$1-shop.json
for d in unseen-values/heldout-hr unseen-values/heldout-logistics \
         heldout-insurance-telecom/heldout-insurance heldout-insurance-telecom/heldout-telecom \
         heldout-utilities-registrar/heldout-utilities heldout-utilities-registrar/heldout-registrar \
         heldout-property-plant/heldout-property heldout-property-plant/heldout-plant \
         heldout-legal-fleet/heldout-legal heldout-legal-fleet/heldout-fleet; do
  c=${d##*heldout-}; $PY $M $B/2026-12-07-cpu-$d/$c.catalog.json $B/2026-12-07-cpu-$d/$c.queries.jsonl $O/$1-$c.json
done
echo done
