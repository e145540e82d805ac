"""Benchmark harness: protocols, runs, the (k, L) ablation and the results report (see benchmarks/README.md)."""
