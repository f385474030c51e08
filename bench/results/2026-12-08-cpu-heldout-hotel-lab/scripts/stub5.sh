#!/bin/bash
# the value menus a stub answers by its priors (no model) on Seal-Tools dev/test and the sixteen
# earlier catalogs (all read): $1 tag, $2 PYTHONPATH dir, $3 output folder; both halves of
# stub5b.sh in turn (run those two at once on two cores)
cd "$(dirname "$0")" && ./stub5b.sh "$1" "$2" "$3" 1 && ./stub5b.sh "$1" "$2" "$3" 2
