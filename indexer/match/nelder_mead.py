"""Nelder-Mead minimisation of a few parameters, one problem or many in lockstep.

The low-resolution alignment (``splitaudit.indexer.match.low_res_align``) searches a similarity
warp (zoom, shift) for every small pair ECC leaves unaligned: ~60 warps a pair, each a few
microseconds of arithmetic on 32x32 images and tens of microseconds of Python and OpenCV call
overhead. ``nelder_mead_many`` runs the searches of many pairs side by side, so that each step
evaluates one point of every pair still searching in one vectorised call; each search takes
exactly the path it takes alone (``nelder_mead``): the two share one generator. SciPy is not
a dependency of the core, and three parameters need no more than this.
"""

from __future__ import annotations

from collections.abc import Callable, Generator

import numpy as np
import numpy.typing as npt

Points = npt.NDArray[np.float64]
# The search asks for one point's cost at a time and ends with (best point, its cost).
Search = Generator[Points, float, tuple[Points, float]]


def simplex_search(start: Points, steps: Points, evals: int) -> Search:
    """Nelder-Mead (reflection 1, expansion 2, contraction and shrink 0.5) from the simplex
    ``start`` and ``start`` moved by ``steps`` along each axis, as a generator: it yields each
    point to evaluate, is sent its cost, and stops after about ``evals`` evaluations, returning
    the best point and its cost."""
    simplex = [start.astype(np.float64)] + [
        start + np.eye(len(start))[i] * steps[i] for i in range(len(start))
    ]
    values = []
    for point in simplex:
        values.append((yield point))
    used = len(simplex)
    while used < evals:
        # a stable sort (as numpy's insertion sort of so few values), in plain Python: this
        # runs ~60 times per problem
        order = sorted(range(len(values)), key=values.__getitem__)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centroid = sum(simplex[1:-1], simplex[0]) / (len(simplex) - 1)
        worst = simplex[-1]
        reflected = centroid + (centroid - worst)
        r_value = yield reflected
        used += 1
        if r_value < values[0]:
            expanded = centroid + 2.0 * (centroid - worst)
            e_value = yield expanded
            used += 1
            simplex[-1], values[-1] = (
                (expanded, e_value) if e_value < r_value else (reflected, r_value)
            )
            continue
        if r_value < values[-2]:
            simplex[-1], values[-1] = reflected, r_value
            continue
        outside = r_value < values[-1]
        contracted = centroid + 0.5 * ((reflected if outside else worst) - centroid)
        c_value = yield contracted
        used += 1
        if c_value < min(r_value, values[-1]):
            simplex[-1], values[-1] = contracted, c_value
            continue
        for i in range(1, len(simplex)):  # shrink towards the best point
            simplex[i] = simplex[0] + 0.5 * (simplex[i] - simplex[0])
            values[i] = yield simplex[i]
        used += len(simplex) - 1
    best = min(range(len(values)), key=values.__getitem__)  # the first of equals, as argmin
    return simplex[best], float(values[best])


def nelder_mead(
    cost: Callable[[Points], float], start: Points, steps: Points, evals: int
) -> Points:
    """Minimise ``cost`` from ``start`` (``simplex_search``); returns the best point."""
    search = simplex_search(start, steps, evals)
    point = next(search)
    while True:
        try:
            point = search.send(float(cost(point)))
        except StopIteration as stop:
            best: Points = stop.value[0]
            return best


def nelder_mead_many(
    costs: Callable[[Points, npt.NDArray[np.intp]], npt.NDArray[np.float64]],
    starts: Points,
    steps: Points,
    evals: int,
) -> tuple[Points, npt.NDArray[np.float64]]:
    """Minimise many problems side by side: ``costs(points, rows)`` evaluates one point of
    each problem ``rows`` (a (k, d) array, the ``rows`` of ``starts`` they belong to) in one
    call. Returns every problem's best point (n, d) and its cost (n,); each is what
    ``nelder_mead`` finds for that problem alone."""
    searches = [simplex_search(start, steps, evals) for start in starts]
    pending = {row: next(search) for row, search in enumerate(searches)}
    best = np.array(starts, np.float64, copy=True)
    best_cost = np.full(len(starts), np.inf)
    while pending:
        rows = np.fromiter(pending, np.intp, len(pending))
        values = costs(np.stack([pending[row] for row in rows.tolist()]), rows)
        for row, value in zip(rows.tolist(), values.tolist(), strict=True):
            try:
                pending[row] = searches[row].send(float(value))
            except StopIteration as stop:
                best[row], best_cost[row] = stop.value
                del pending[row]
    return best, best_cost
