#!/usr/bin/env bash
# Each request of requests.txt through `stackroute run --auto-approve --json` on the office
# catalog, one process per request, one JSON line each (the request first).
# $1: output file. Run from the repository root with the environment of command.txt; for the
# "before" side PYTHONPATH put the older checkout's package first (command.txt).
set -euo pipefail
here="$(dirname "$0")"
: > "$1"
while IFS= read -r request; do
  catalog="$here/office.catalog.json"
  [[ "$request" == "Send money to Asha" ]] && catalog=examples/bank.catalog.json
  out=$(.venv/bin/python -m stackroute.server.cli run "$catalog" "$request" --auto-approve --json 2>/dev/null)
  python3 -c 'import json,sys; print(json.dumps({"request": sys.argv[1], **json.loads(sys.argv[2])}))' "$request" "$out" >> "$1"
done < "$here/requests.txt"
