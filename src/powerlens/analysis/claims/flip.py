"""What would have to change for a verdict to flip: each criterion's margin, in words, from the same numbers
the criterion decided on (a count of layers against the share it needs, a value against its threshold).

A reproduced verdict flips when any one part of its criterion fails; a not-reproduced one when every failed
part passes. Undecided layers (Monte Carlo at its cap, or too few eigen-directions) are named: an inconclusive
verdict flips either way as they decide."""

from __future__ import annotations

import math

from powerlens.core.fmt import fmt_num


def layers(n: int) -> str:
    return f"{n} layer" + ("" if n == 1 else "s")


def at_least(yes: int, undecided: int, of: int, need: float, what: str) -> str:
    """A count that must reach ``need`` (of ``of`` layers): how many layers would have to change."""
    k = max(0, math.ceil(need - 1e-12))  # the smallest passing count
    if yes >= k:
        return (f"{what}: {layers(yes - k + 1)} of the {yes} significant would have to lose significance "
                f"(needs {k} of {of})")
    if yes + undecided < k:
        return f"{what}: {k - yes} more of the {of} layers would have to be significant (needs {k}, has {yes})"
    return f"{what}: {k - yes} of the {undecided} undecided layers deciding significant would make it pass (needs {k})"


def below(yes: int, undecided: int, of: int, limit: float, what: str) -> str:
    """A count that must stay under ``limit``: how many layers would have to change."""
    k = max(0, math.ceil(limit - 1e-12))  # the smallest failing count
    if yes + undecided < k:
        return f"{what}: {k - yes} more of the {of} layers would have to be significant (fails at {k})"
    if yes >= k:
        return (f"{what}: {layers(yes - k + 1)} of the {yes} significant would have to lose significance "
                f"(passes under {k})")
    return f"{what}: the {undecided} undecided layers decide it (fails at {k}, has {yes})"


def threshold(value: float, bound: float, what: str, above: bool = True) -> str:
    """A value that passes above (``above``) or below a bound: which way it would have to cross it."""
    passing = value > bound if above else value < bound
    cross = {(True, True): "fall to", (False, True): "rise above", (True, False): "rise to",
             (False, False): "fall below"}[(passing, above)]
    return f"{what} {fmt_num(value)} would have to {cross} {fmt_num(bound)}"


def join(parts: list[tuple[str, str]], state: str) -> str:
    """Parts of one criterion as (margin, tri-state): any one flips a pass, every failed (or undecided) one
    must change to flip a failure (or an inconclusive verdict)."""
    from powerlens.analysis import decisions as dc

    shown = [p for p, s in parts if p and (state == dc.YES or s == state)]
    if not shown:
        return "-"
    if len(shown) == 1:
        return shown[0]
    return ("any one of: " if state == dc.YES else "each of: ") + "; ".join(shown)
