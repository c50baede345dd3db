"""Table synthesis: measure marginals, select a (fair) structure, estimate, sample (MST,
PreFair, AIM)."""
