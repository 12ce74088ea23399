"""CPU-side orchestration of runs and documents, run by an RQ worker (never by the GPU worker).

``dragoman rq-worker`` runs the RQ worker for these tasks and the :class:`CompletionDispatcher`
that turns "the last job of a run/document finished" entries into RQ jobs.
"""
