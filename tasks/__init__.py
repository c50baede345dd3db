"""Thin Prefect tasks around :mod:`privfair.release` (the library never imports Prefect).

* :mod:`tasks.private` — stages that read the private data or true counts. They take and
  return only file references (path + sha256) or post-noise artefacts, never persist a result
  (``persist_result=False``) and never cache (``NO_CACHE``).
* :mod:`tasks.post_noise` — stages after the last measurement. ``estimate`` and ``sample``
  cache on ``INPUTS + TASK_SOURCE``: their inputs are content-addressed post-noise artefacts.
* :mod:`tasks.public` — preflight and publish; only ``load`` and ``publish`` retry, and only on
  I/O errors.
"""
