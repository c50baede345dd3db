"""Declared domains and attribute roles.

A :class:`Domain` is the public, declared shape of a table of integer codes: an ordered list of
attributes and the number of categories of each. It never comes from the data; codes are checked
against it and refused when they fall outside.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from math import prod

import numpy as np

from privfair.core.errors import DomainError, RoleError

Clique = tuple[str, ...]


def code_dtype(size: int) -> np.dtype:
    """The smallest unsigned integer dtype that holds the codes ``0 .. size - 1``.

    Wide tables keep their codes this narrow (a byte per cell for most attributes) between
    stages; arithmetic on codes (packed keys) must widen first.
    """
    for dtype in (np.uint8, np.uint16, np.uint32):
        if size - 1 <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.uint64)


@dataclass(frozen=True)
class Domain:
    """Ordered attributes with their declared number of categories.

    Parameters
    ----------
    attributes : tuple of str
        Attribute names, in table order.
    sizes : tuple of int
        Number of categories of each attribute (codes are ``0 .. size-1``).
    """

    attributes: tuple[str, ...]
    sizes: tuple[int, ...]
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        attributes = tuple(str(a) for a in self.attributes)
        sizes = tuple(int(s) for s in self.sizes)
        object.__setattr__(self, "attributes", attributes)
        object.__setattr__(self, "sizes", sizes)
        if len(attributes) != len(sizes):
            raise DomainError(
                f"domain: {len(attributes)} attributes but {len(sizes)} sizes; expected one each"
            )
        if len(set(attributes)) != len(attributes):
            raise DomainError("domain: attribute names must be unique")
        for a, s in zip(attributes, sizes, strict=True):
            if s < 1:
                raise DomainError(f"domain: attribute {a!r} has size {s}; expected >= 1")
        object.__setattr__(self, "_index", {a: i for i, a in enumerate(attributes)})

    @classmethod
    def from_dict(cls, sizes: Mapping[str, int]) -> Domain:
        """Build a domain from ``{attribute: size}``, keeping the mapping's order."""
        return cls(tuple(sizes), tuple(sizes.values()))

    def to_dict(self) -> dict[str, int]:
        return dict(zip(self.attributes, self.sizes, strict=True))

    def __len__(self) -> int:
        return len(self.attributes)

    def __iter__(self) -> Iterator[str]:
        return iter(self.attributes)

    def __contains__(self, attribute: object) -> bool:
        return attribute in self._index

    def size(self, attribute: str) -> int:
        return self.sizes[self.position(attribute)]

    def position(self, attribute: str) -> int:
        try:
            return self._index[attribute]
        except KeyError:
            raise DomainError(f"attribute {attribute!r} is not in the declared domain") from None

    def canonical(self, attributes: Iterable[str]) -> Clique:
        """Sort attributes into domain order (the axis order of every table)."""
        return tuple(sorted(set(attributes), key=self.position))

    def shape(self, attributes: Iterable[str]) -> tuple[int, ...]:
        return tuple(self.size(a) for a in attributes)

    def cells(self, attributes: Iterable[str]) -> int:
        return prod(self.shape(attributes))

    def project(self, attributes: Iterable[str]) -> Domain:
        clique = self.canonical(attributes)
        return Domain(clique, self.shape(clique))

    def with_sizes(self, sizes: Mapping[str, int]) -> Domain:
        """Return a copy with some attribute sizes replaced (used by compression)."""
        return Domain(self.attributes, tuple(sizes.get(a, s) for a, s in self.items()))

    def items(self) -> Iterator[tuple[str, int]]:
        return zip(self.attributes, self.sizes, strict=True)

    def check_codes(self, columns: Mapping[str, np.ndarray]) -> None:
        """Refuse columns that are missing, not integer, or hold codes outside the domain.

        The message names the column and the declared range, never the offending values,
        because it may end up in logs.
        """
        missing = [a for a in self.attributes if a not in columns]
        if missing:
            raise DomainError(f"missing columns {missing}; the domain declares {list(self)}")
        extra = [c for c in columns if c not in self._index]
        if extra:
            raise DomainError(f"unexpected columns {extra}; the domain declares {list(self)}")
        for a in self.attributes:
            self.check_column(a, columns[a])

    def check_column(self, attribute: str, codes: np.ndarray, *, where: str = "") -> np.ndarray:
        """Refuse a column that is not 1-D integer codes inside ``attribute``'s domain.

        Returns the codes as int64. ``where`` names the table in the message.
        """
        prefix = f"{where}: " if where else ""
        size = self.size(attribute)
        codes = np.asarray(codes)
        if codes.ndim != 1:
            raise DomainError(f"{prefix}column {attribute!r}: expected a 1-D array of codes")
        if not np.issubdtype(codes.dtype, np.integer):
            raise DomainError(
                f"{prefix}column {attribute!r}: expected integer codes, got dtype {codes.dtype}")
        if np.any(codes < 0) or np.any(codes >= size):
            raise DomainError(
                f"{prefix}column {attribute!r}: codes outside the declared domain 0..{size - 1}")
        return codes.astype(np.int64, copy=False)


@dataclass(frozen=True)
class Roles:
    """Protected (P), admissible (A) and outcome (O) attributes; the rest are free.

    Justifiable fairness asks that every path between a protected and an outcome attribute in
    the model graph passes through an admissible one.
    """

    protected: tuple[str, ...] = ()
    admissible: tuple[str, ...] = ()
    outcome: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("protected", "admissible", "outcome"):
            value = getattr(self, name)
            if isinstance(value, str):
                value = (value,)
            value = tuple(value)
            if len(set(value)) != len(value):
                raise RoleError(f"roles: {name} lists an attribute twice: {list(value)}")
            object.__setattr__(self, name, value)
        sets = {n: set(getattr(self, n)) for n in ("protected", "admissible", "outcome")}
        for a, b in (("protected", "admissible"), ("protected", "outcome"),
                     ("admissible", "outcome")):
            both = sets[a] & sets[b]
            if both:
                raise RoleError(
                    f"roles: {sorted(both)} are both {a} and {b}; the role sets must be disjoint"
                )

    @classmethod
    def from_dict(cls, roles: Mapping[str, Iterable[str]]) -> Roles:
        unknown = set(roles) - {"protected", "admissible", "outcome", "free"}
        if unknown:
            raise RoleError(
                f"roles: unknown role names {sorted(unknown)}; expected protected, "
                "admissible, outcome or free"
            )
        return cls(*(tuple(roles.get(k, ())) for k in ("protected", "admissible", "outcome")))

    def to_dict(self) -> dict[str, list[str]]:
        return {
            "protected": list(self.protected),
            "admissible": list(self.admissible),
            "outcome": list(self.outcome),
        }

    def role_of(self, attribute: str) -> str:
        if attribute in self.protected:
            return "protected"
        if attribute in self.admissible:
            return "admissible"
        if attribute in self.outcome:
            return "outcome"
        return "free"

    def free(self, domain: Domain) -> tuple[str, ...]:
        used = set(self.protected) | set(self.admissible) | set(self.outcome)
        return tuple(a for a in domain if a not in used)

    def check(self, domain: Domain, *, fair: bool) -> None:
        """Check the roles against a domain.

        Parameters
        ----------
        fair : bool
            Whether a fair structure is requested; then protected, admissible and outcome
            must all be non-empty.
        """
        for name in ("protected", "admissible", "outcome"):
            unknown = [a for a in getattr(self, name) if a not in domain]
            if unknown:
                raise RoleError(f"roles: {name} attributes {unknown} are not in the domain")
        if fair:
            for name in ("protected", "admissible", "outcome"):
                if not getattr(self, name):
                    raise RoleError(
                        f"roles: the {name} set is empty; a fair method needs at least one "
                        f"{name} attribute"
                    )
