"""privfair's version: the one place it is written (``pyproject.toml`` reads it from here).

A constant rather than ``importlib.metadata``: the release records it in every manifest,
and the metadata lookup cost 30 ms of a 2 s release; it also holds in a source checkout
that was never installed.
"""

VERSION = "0.1.0"
