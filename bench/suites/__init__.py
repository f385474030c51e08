"""The suite harness: run, records, report, aggregate, gold and scoring."""
