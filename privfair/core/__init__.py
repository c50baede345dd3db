"""Core value types and the privacy engine's primitives: domains, the ledger, mechanisms.

Nothing here imports pandas; every stage of the library builds on these.
"""
