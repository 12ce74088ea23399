"""dragoman's GPU worker: one process, one vLLM ``AsyncLLM`` engine, fed continuously from Redis."""
