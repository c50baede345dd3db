"""Release kinds, one package each; a kind imports only the shared layer of
:mod:`privfair.release` (protocol, request, manifest, tabular, ...), never another kind
(an import-linter ``independence`` contract). :mod:`privfair.release.registry` lists them."""
