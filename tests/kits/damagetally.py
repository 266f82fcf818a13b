"""``DamageTally``: what a damage campaign found, case by case (how the damage showed, and what ``verify --repair``
then did), printed as one line a tally; the cases whose outcome is not one of ``accepted`` (or whose repair was
wrong) are kept as failures. The Redis and PostgreSQL campaigns differ only in their outcomes."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

REPAIRS = ("whole", "recorded", "refused", "wrong")


@dataclass
class DamageTally:
    accepted: tuple[str, ...]  # outcomes that are not failures
    shown: tuple[str, ...]  # the outcomes of the printed line, in order
    always: tuple[str, ...] = ()  # those shown even when none (empty: every one)
    cases: int = 0
    outcomes: Counter = field(default_factory=Counter)
    repairs: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def add(self, case: str, outcome: str, repair: str, detail: str) -> None:
        self.cases += 1
        self.outcomes[outcome] += 1
        if repair:
            self.repairs[repair.split(":")[0]] += 1
        if outcome not in self.accepted or repair.startswith("wrong"):
            self.failures.append(f"{case}: {outcome} {repair} {detail}")

    def line(self, title: str) -> str:
        always = self.always or self.shown
        shown = ", ".join(f"{name} {self.outcomes[name]}" for name in self.shown
                          if self.outcomes[name] or name in always)
        fixed = ", ".join(f"{name} {self.repairs[name]}" for name in REPAIRS)
        return f"{title:<28} cases {self.cases:4}: {shown}; after verify --repair: {fixed}"
