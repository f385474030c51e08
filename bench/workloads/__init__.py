"""Workload generators, catalogs, datasets and the suites' data."""
