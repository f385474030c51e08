"""Reliability: chaos, crash, fuzz, load, multi-instance, store throughput, PostgreSQL cluster."""
