"""What the HTTP API offers each tenant beyond single jobs: runs and documents from uploaded
files, OpenAI batches, the per-key limit on unfinished jobs, and the history of its jobs, runs
and documents with their retries.

It builds on the application SDK (``producer``) and is served by ``api/``; applications never
import it.
"""
