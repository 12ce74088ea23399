"""``dragoman eval``: translate segments users already have human translations for, and score the output.

Readers turn a gettext catalogue, an XLIFF, a TMX, two aligned text files or a JSONL of pairs into
:class:`~evaluation.segments.Segment` s; :mod:`evaluation.runner` sends each as a job through the
running deployment (the producer's submission path: Redis and a live worker) and waits for it;
:mod:`evaluation.scoring` scores the translations with sacreBLEU; :mod:`evaluation.report` sums
them up per language and model and prints the table (or JSON).
"""
