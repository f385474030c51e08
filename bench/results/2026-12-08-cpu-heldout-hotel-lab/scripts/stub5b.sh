#!/bin/bash
# stub5.sh split in two halves to run on two cores: $1 tag, $2 PYTHONPATH dir, $3 output folder, $4 half (1|2)
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 STACKROUTE_CACHE_DIR=/work/cache/stackroute PYTHONPATH=$2
B=/work/main/bench/results; M=$B/2026-12-07-cpu-none-bias/menus.py; O=$3; mkdir -p $O
PY=/work/main/.venv/bin/python
cd /tmp
if [ "$4" = 1 ]; then
  $PY $M dev $O/$1-dev.json
  for d in unseen-values/heldout-hr unseen-values/heldout-logistics heldout-insurance-telecom/heldout-insurance \
           heldout-insurance-telecom/heldout-telecom heldout-utilities-registrar/heldout-utilities; do
    c=${d##*heldout-}; $PY $M $B/2026-12-07-cpu-$d/$c.catalog.json $B/2026-12-07-cpu-$d/$c.queries.jsonl $O/$1-$c.json
  done
else
  $PY $M test $O/$1-test.json
  R=$B/2026-12-07-cpu-unseen-travel-clinic; U=$B/2026-12-06-cpu-unseen-itops
  for c in travel clinic; do $PY $M $R/$c.catalog.json $R/$c.queries.jsonl $O/$1-$c.json; done
  $PY $M $U/itops.catalog.json $U/itops.queries.jsonl $O/$1-itops.json
  $PY $M $U/heldout/shopops.catalog.json $U/heldout/shopops.queries.jsonl $O/$1-shop.json
  for d in heldout-utilities-registrar/heldout-registrar heldout-property-plant/heldout-property \
           heldout-property-plant/heldout-plant heldout-legal-fleet/heldout-legal heldout-legal-fleet/heldout-fleet; do
    c=${d##*heldout-}; $PY $M $B/2026-12-07-cpu-$d/$c.catalog.json $B/2026-12-07-cpu-$d/$c.queries.jsonl $O/$1-$c.json
  done
fi
echo done
