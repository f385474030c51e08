#!/bin/bash
# stub menus (1.5B mode, priors answer) for Seal-Tools dev/test and six catalogs; $1 = tag, $2 = PYTHONPATH ('' for the working tree)
export OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 STACKROUTE_CACHE_DIR=/work/cache/stackroute
[ -n "$2" ] && export PYTHONPATH=$2
B=/work/main/bench/results
M=$B/2026-12-07-cpu-none-bias/menus.py
O=/work/scratch/s51/stub; mkdir -p $O
R=$B/2026-12-07-cpu-unseen-travel-clinic; U=$B/2026-12-06-cpu-unseen-itops; V=$B/2026-12-07-cpu-unseen-values
PY=/work/main/.venv/bin/python
cd /tmp
for s in dev test; do $PY $M $s $O/$1-$s.json; done
$PY $M $R/travel.catalog.json $R/travel.queries.jsonl $O/$1-travel.json
$PY $M $R/clinic.catalog.json $R/clinic.queries.jsonl $O/$1-clinic.json
$PY $M $U/itops.catalog.json $U/itops.queries.jsonl $O/$1-itops.json
$PY $M $U/heldout/shopops.catalog.json $U/heldout/shopops.queries.jsonl $O/$1-shop.json
$PY $M $V/heldout-hr/hr.catalog.json $V/heldout-hr/hr.queries.jsonl $O/$1-hr.json
$PY $M $V/heldout-logistics/logistics.catalog.json $V/heldout-logistics/logistics.queries.jsonl $O/$1-logistics.json

H=$B/2026-12-07-cpu-heldout-insurance-telecom
$PY $M $H/heldout-insurance/insurance.catalog.json $H/heldout-insurance/insurance.queries.jsonl $O/$1-insurance.json
$PY $M $H/heldout-telecom/telecom.catalog.json $H/heldout-telecom/telecom.queries.jsonl $O/$1-telecom.json

U2=$B/2026-12-07-cpu-heldout-utilities-registrar
$PY $M $U2/heldout-utilities/utilities.catalog.json $U2/heldout-utilities/utilities.queries.jsonl $O/$1-utilities.json

$PY $M $U2/heldout-registrar/registrar.catalog.json $U2/heldout-registrar/registrar.queries.jsonl $O/$1-registrar.json
echo done
