"""Parallel simulated annealing over a cost model: the search behind model-based tuners.

Several chains walk the space at once, each step changing one knob of each chain's
config to a random other choice (a random neighbour). A move to a config scored
``delta`` lower is accepted with probability ``exp(delta / (scale * temperature))``,
the temperature falling linearly from ``temp[0]`` to ``temp[1]``; ``scale`` is the
spread of the starting scores, so the schedule does not depend on the model's units.
Every config scored on the way competes for the ``n_best`` best that the search
returns; the search stops early once those have not changed for ``early_stop`` steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["anneal"]

_MOVE_TRIES = 8  # tries to find a valid one-knob move before a chain stays put for a step


def anneal(space, score: Callable[[list[int]], np.ndarray], starts: Sequence[int], n_best: int,
           rng: np.random.Generator, exclude: set[int] | None = None, n_iter: int = 100,
           early_stop: int = 30, temp: tuple[float, float] = (1.0, 0.0)) -> list[int]:
    """The ``n_best`` best-scored configs (indices, best first) found from ``starts``.

    ``score(indices)`` returns one score per index, higher is better (``-inf`` for a
    config to avoid). Indices in ``exclude`` are walked through but never returned.
    """
    exclude = exclude or set()
    points = [int(p) for p in starts]
    if not points or n_best <= 0:
        return []
    scores = np.asarray(score(points), dtype=np.float64)
    best: dict[int, float] = {}
    _offer(best, points, scores, n_best, exclude)
    finite = scores[np.isfinite(scores)]
    scale = float(finite.std()) if len(finite) > 1 and finite.std() > 0 else 1.0
    strides, sizes = _strides(space)
    movable = [k for k, size in enumerate(sizes) if size > 1]
    if not movable:
        return _ranked(best)
    last_change = 0
    for step in range(n_iter):
        t = temp[0] + (temp[1] - temp[0]) * step / max(1, n_iter)
        moved = [_move(space, p, strides, sizes, movable, rng) for p in points]
        new_scores = np.asarray(score(moved), dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            delta = np.where(np.isneginf(scores), np.inf, new_scores - scores)
            prob = np.exp(np.minimum(delta / (scale * (t + 1e-5)), 0.0))
        prob = np.nan_to_num(prob, nan=0.0)
        accept = rng.random(len(points)) < prob
        points = [m if a else p for p, m, a in zip(points, moved, accept)]
        scores = np.where(accept, new_scores, scores)
        if _offer(best, moved, new_scores, n_best, exclude):
            last_change = step
        elif step - last_change >= early_stop:
            break
    return _ranked(best)


def _strides(space) -> tuple[list[int], list[int]]:
    sizes = [len(k) for k in space.knobs]
    strides, acc = [], 1
    for size in sizes:
        strides.append(acc)
        acc *= size
    return strides, sizes


def _move(space, index: int, strides, sizes, movable, rng: np.random.Generator) -> int:
    """A random valid config one knob away from ``index`` (``index`` itself if none is found)."""
    for _ in range(_MOVE_TRIES):
        k = movable[int(rng.integers(len(movable)))]
        old = (index // strides[k]) % sizes[k]
        new = int(rng.integers(sizes[k] - 1))
        new += new >= old
        j = index + (new - old) * strides[k]
        if space.is_valid(j):
            return j
    return index


def _offer(best: dict[int, float], points, scores, n_best: int, exclude: set[int]) -> bool:
    """Add better configs to ``best`` (kept at ``n_best``); whether it changed."""
    changed = False
    for p, s in zip(points, scores):
        if p in exclude or p in best or not np.isfinite(s):
            continue
        if len(best) < n_best:
            best[p] = float(s)
            changed = True
            continue
        worst = min(best, key=lambda i: (best[i], -i))
        if s > best[worst]:
            del best[worst]
            best[p] = float(s)
            changed = True
    return changed


def _ranked(best: dict[int, float]) -> list[int]:
    return sorted(best, key=lambda i: (-best[i], i))
