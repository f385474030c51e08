#!/usr/bin/env bash
# What produced this folder (run from the repository root, on the shared 2-core CPU machine):
.venv/bin/stackroute bench streaming --max-tokens 200 --rounds 1 \
    --out bench/results/2026-12-03-cpu-streaming 2>&1 | tee bench/results/2026-12-03-cpu-streaming/stdout.txt
# One round: on this machine (2 cores shared by five engineers' test runs, load average 15-21)
# a 200-token answer took 963 s end to end in a first, three-round attempt, which was stopped.
