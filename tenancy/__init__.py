"""What the HTTP API offers each tenant beyond single jobs: runs and documents from uploaded
files, OpenAI batches, and the per-key limit on unfinished jobs.

It builds on the application SDK (``producer``) and is served by ``api/``; applications never
import it.
"""
