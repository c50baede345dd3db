"""DP causal discovery: PrivPC, the LapMech baseline and PrivPC* (Xu 2021, ch. 4).

The search functions return a :class:`~privfair.causal.privpc.DiscoveryResult` whose graph is
a :class:`~privfair.causal.graph.CausalGraph` (a CPDAG with the declared roles' constraints).
"""

from privfair.causal.graph import CausalGraph, orient, skeleton_scores, unblocked_paths
from privfair.causal.pc import pc, pc_gaussian
from privfair.causal.privpc import DiscoveryResult, lap_mech, priv_pc, priv_pc_star

__all__ = [
    "CausalGraph",
    "DiscoveryResult",
    "lap_mech",
    "orient",
    "pc",
    "pc_gaussian",
    "priv_pc",
    "priv_pc_star",
    "skeleton_scores",
    "unblocked_paths",
]
