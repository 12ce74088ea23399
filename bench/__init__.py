"""Benchmarks: run them as modules (``python -m bench.enqueue``); results go to bench/RESULTS.md."""
