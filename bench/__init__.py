"""Benchmarks: run them as modules (``python -m bench.enqueue``); results go to bench/RESULTS.md."""

import os

# Throughput benchmarks compare the worker with bare engines on workloads whose texts repeat: the
# translation memory would serve the repeats and flatter the worker. Off for every benchmark and
# the worker processes they start; bench.memory turns it on per pass where it measures it.
os.environ.setdefault("DRAGOMAN_MEMORY_ENABLED", "false")
