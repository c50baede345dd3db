"""Thin Prefect layer around :mod:`privfair.release` (the library never imports Prefect).

* :mod:`tasks.stages` — the Prefect driver of the release protocol: every stage of every
  release kind runs as a task that never retries, caches or persists a result
  (``retries=0``, ``NO_CACHE``, ``persist_result=False``); stages pass file references and
  post-noise values only.
* :mod:`tasks.ops` — refusals as one line, failure events, the per-dataset concurrency slot,
  the run record and the release's artifacts.
* :mod:`tasks.evaluate` — the evaluation grid's cell tasks.
"""
