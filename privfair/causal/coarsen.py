"""Public coarsening of a discretised domain for structure discovery.

The G² tests of PC lose power fast as tables grow, so the dissertation's Adult case study
(§4.6.3) discretises every attribute to 2–4 categories. A coarsening here is a public,
declared map from a column's labels to groups (never chosen from the data); applying it to
codes is a deterministic, row-by-row transformation, so it costs no budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from privfair.core.domain import Domain
from privfair.core.errors import DomainError

#: Groups of label lists, per column; columns left out keep their categories.
Groups = Mapping[str, Sequence[Sequence[str]]]

#: A group given as ``[REST]`` holds every declared label that no other group lists.
REST = "*"

#: Adult with 2–4 categories per attribute, in the spirit of the dissertation's §4.6.3.
ADULT_CH4: Groups = {
    "age": [["17-21", "22-26", "27-31"], ["32-36", "37-41", "42-46"],
            ["47-51", "52-56", "57-61"],
            ["62-66", "67-71", "72-76", "77-81", "82-86", "87-90"]],
    "workclass": [["Private"], ["Self-emp-not-inc", "Self-emp-inc"],
                  ["Federal-gov", "Local-gov", "State-gov"], ["Without-pay", "Never-worked", "?"]],
    "education": [["Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th"],
                  ["HS-grad"], ["Some-college", "Assoc-acdm", "Assoc-voc"],
                  ["Bachelors", "Masters", "Prof-school", "Doctorate"]],
    "marital-status": [["Married-civ-spouse", "Married-AF-spouse"], ["Never-married"],
                       ["Divorced", "Separated", "Widowed", "Married-spouse-absent"]],
    "occupation": [["Exec-managerial", "Prof-specialty", "Tech-support", "Sales"],
                   ["Craft-repair", "Machine-op-inspct", "Handlers-cleaners",
                    "Transport-moving", "Farming-fishing"],
                   ["Adm-clerical", "Other-service", "Priv-house-serv", "Protective-serv"],
                   ["Armed-Forces", "?"]],
    "relationship": [["Husband", "Wife"], ["Own-child"],
                     ["Not-in-family", "Other-relative", "Unmarried"]],
    "race": [["White"], ["Black"], ["Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"]],
    "capital-gain": [["0"], ["1-4999", "5000-9999", ">=10000"]],
    "capital-loss": [["0"], ["1-4999", "5000-9999", ">=10000"]],
    "hours-per-week": [["1-10", "11-20", "21-30", "31-40"], ["41-50"],
                       ["51-60", "61-70", "71-80", "81-90", "91-99"]],
    "native-country": [["United-States"], [REST]],
}


def coarsen(codes: np.ndarray, domain: Domain, labels: Callable[[str], Sequence[str]],
            groups: Groups) -> tuple[np.ndarray, Domain]:
    """Map codes to group codes; checks that each grouped column's groups partition its labels.

    Parameters
    ----------
    codes : ndarray of int, shape (n, p)
        Codes over ``domain``, columns in domain order.
    domain : Domain
        The declared (fine) domain.
    labels : callable
        ``labels(column)`` gives the declared labels of a column, in code order.
    groups : mapping
        For each coarsened column, its groups as lists of labels.
    """
    unknown = [c for c in groups if c not in domain]
    if unknown:
        raise DomainError(f"coarsening: columns {unknown} are not in the domain")
    out = np.array(codes, dtype=np.int64, copy=True)
    sizes = list(domain.sizes)
    for column, column_groups in groups.items():
        declared = list(labels(column))
        listed = {lab for members in column_groups for lab in members if lab != REST}
        column_groups = [[lab for lab in declared if lab not in listed]
                         if list(members) == [REST] else list(members)
                         for members in column_groups]
        group_of = {lab: g for g, members in enumerate(column_groups) for lab in members}
        if sorted(group_of) != sorted(declared) or sum(map(len, column_groups)) != len(declared):
            raise DomainError(f"coarsening: the groups of column {column!r} must partition its "
                              f"declared labels {declared}")
        k = domain.position(column)
        table = np.array([group_of[lab] for lab in declared], dtype=np.int64)
        out[:, k] = table[out[:, k]]
        sizes[k] = len(column_groups)
    return out, Domain(domain.attributes, tuple(sizes))
