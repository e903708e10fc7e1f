"""A 2-D map of the models a run visited, as in the seeds' article: PCA or UMAP.

The default map is a PCA (the two leading principal components from numpy's
SVD: milliseconds, linear, the axes are directions in parameter space); UMAP
(``harness report --umap``) shows neighbourhoods instead, at the cost of numba
compiling for some seconds on first use.

From a run's population log (``population.npz``, format in
:mod:`harness.records`): for OpenAI-ES every candidate of every generation
whose centre is stored is rebuilt from the centre, sigma and its noise-table
slice (the table regenerated from its seed), exactly as the workers built it;
for algorithms with vector candidates the stored candidates are used, or the
centres alone. Points are coloured by fitness and by generation; the centre's
path is drawn on top.

Runs without a population log are mapped by their final parameters instead
(one point per run, coloured by final return), when at least four runs of one
env and policy size are present.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from harness import rundir
from harness.policy_io import PolicyLoadError, read_npy
from harness.records import PopulationLog, RunRecord

MAX_POINTS = 5000
MIN_POINTS = 4


@dataclass
class ModelCloud:
    """Parameter vectors with their fitness and generation; ``is_centre`` marks centres."""

    params: np.ndarray
    fitness: np.ndarray
    generation: np.ndarray
    is_centre: np.ndarray


def models_from_population(log: PopulationLog, max_points: int = MAX_POINTS) -> ModelCloud | None:
    """The visited models a population log can rebuild (subsampled by generation to a cap)."""
    dim = log.centre.shape[1] if log.centre.ndim == 2 else 0
    if dim == 0 or len(log.centre_generation) == 0:
        return None
    centre_rows = {int(g): i for i, g in enumerate(log.centre_generation)}
    gen_rows = {int(g): i for i, g in enumerate(log.generation)}
    vector_rows = (
        {int(g): i for i, g in enumerate(log.candidate_generation)}
        if log.candidate_generation is not None
        else {}
    )
    noise = None
    if log.uses_noise_table:
        from evaluation.noise import NoiseSpec, NoiseTable

        noise = NoiseTable.create(NoiseSpec(int(log.noise_size), int(log.noise_seed)))
    try:
        mappable = [
            g
            for g in sorted(centre_rows)
            if g in gen_rows and (noise is not None or g in vector_rows)
        ]
        width = log.fitness.shape[1] if log.fitness.ndim == 2 else 0
        per_generation = max(width, 1) + 1
        step = max(1, math.ceil(len(mappable) * per_generation / max_points))
        chosen = set(mappable[::step])
        params, fitness, generation, centre_flag = [], [], [], []
        for g in sorted(centre_rows):
            centre = log.centre[centre_rows[g]]
            row = gen_rows.get(g)
            gen_fitness = log.fitness[row] if row is not None else np.array([])
            finite = gen_fitness[np.isfinite(gen_fitness)]
            params.append(centre)
            fitness.append(float(finite.mean()) if finite.size else math.nan)
            generation.append(g)
            centre_flag.append(True)
            if g not in chosen or row is None:
                continue
            if noise is not None:
                sigma = float(log.sigma[row])
                for i in range(width):
                    index, sign = int(log.noise_index[row, i]), int(log.sign[row, i])
                    if index < 0 or sign == 0 or not np.isfinite(gen_fitness[i]):
                        continue
                    eps = noise.get(index, dim)
                    params.append(centre + np.float32(sign * sigma) * eps)
                    fitness.append(float(gen_fitness[i]))
                    generation.append(g)
                    centre_flag.append(False)
            elif log.candidates is not None:
                vectors = log.candidates[vector_rows[g]]
                for i in range(min(len(vectors), width)):
                    if not np.isfinite(gen_fitness[i]):
                        continue
                    params.append(vectors[i])
                    fitness.append(float(gen_fitness[i]))
                    generation.append(g)
                    centre_flag.append(False)
    finally:
        if noise is not None:
            noise.close()
    return ModelCloud(
        np.asarray(params, np.float32),
        np.asarray(fitness, np.float64),
        np.asarray(generation, np.int64),
        np.asarray(centre_flag, bool),
    )


METHODS = ("pca", "umap")
METHOD_NAMES = {"pca": "PCA", "umap": "UMAP"}


def _leading_components(centred: np.ndarray, k: int = 2) -> np.ndarray:
    """The ``k`` leading right singular vectors of ``centred`` (rows of the result).

    Exact SVD when the matrix is small; otherwise a randomized range finder with
    power iterations (Halko et al. 2011) from a fixed seed, so a 5000 x 6536 map
    costs a few matrix products instead of a full SVD.
    """
    rows, cols = centred.shape
    if min(rows, cols) <= 300:
        return np.linalg.svd(centred, full_matrices=False)[2][:k]
    rng = np.random.default_rng(0)
    basis = centred @ rng.standard_normal((cols, k + 10))
    for _ in range(2):
        basis, _ = np.linalg.qr(basis)
        basis = centred @ (centred.T @ basis)
    basis, _ = np.linalg.qr(basis)
    small = basis.T @ centred
    return np.linalg.svd(small, full_matrices=False)[2][:k]


def pca(params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Projection on the two leading principal components, and their explained variance ratios.

    Signs are fixed (the largest loading of each component positive) so the map
    does not flip between builds of the report.
    """
    data = np.asarray(params, dtype=np.float32)
    centred = data - data.mean(axis=0)
    components = _leading_components(centred)
    if len(components):
        picks = np.abs(components).argmax(axis=1)
        signs = np.sign(components[np.arange(len(components)), picks])
        components = components * np.where(signs == 0, 1.0, signs)[:, None]
    xy = centred @ components.T
    while xy.shape[1] < 2:
        xy = np.column_stack([xy, np.zeros(len(xy))])
    total = float((centred**2).sum())
    ratios = (xy**2).sum(axis=0) / total if total > 0 else np.zeros(2)
    return xy, ratios


def embed(params: np.ndarray, seed: int = 0, method: str = "pca") -> np.ndarray:
    """2-D embedding: PCA (default, see :func:`pca`) or UMAP (deterministic ``random_state``,
    neighbours scaled down for few points)."""
    if method == "pca":
        return pca(params)[0]
    if method != "umap":
        raise ValueError(f"unknown map method {method!r}; use one of {', '.join(METHODS)}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import umap

        n = len(params)
        reducer = umap.UMAP(
            n_components=2,
            n_neighbors=max(2, min(15, n - 1)),
            min_dist=0.1,
            random_state=seed,
            init="spectral" if n > 60 else "random",
            n_jobs=1,
        )
        embedding: np.ndarray = reducer.fit_transform(params)
    return embedding


def centres_caption(cloud: ModelCloud) -> str:
    """The caption's centre count, with how many are distinct when some repeat.

    Optimizers that keep their recommendation between generations (Nevergrad's ES)
    store repeated centres, which overlap on the map as one point.
    """
    centres = cloud.params[cloud.is_centre]
    distinct = len(np.unique(centres, axis=0))
    repeats = f" ({distinct} distinct)" if distinct < len(centres) else ""
    return f"{len(centres)} centres{repeats}"


def population_figure(
    record: RunRecord,
    log: PopulationLog,
    title_caption: str,
    max_points: int = MAX_POINTS,
    method: str = "pca",
) -> Figure | None:
    """Two panels over one embedding: coloured by fitness and by generation."""
    import matplotlib.pyplot as plt

    from harness.report.plots import apply_style, finish

    cloud = models_from_population(log, max_points)
    if cloud is None or len(cloud.params) < MIN_POINTS:
        return None
    xy = embed(cloud.params, method=method)
    apply_style()
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.2))
    candidates = ~cloud.is_centre
    centres = np.flatnonzero(cloud.is_centre)
    order = centres[np.argsort(cloud.generation[centres])]
    panels = [("fitness", cloud.fitness, "viridis"), ("generation", cloud.generation, "magma")]
    for ax, (name, values, cmap) in zip(axes, panels, strict=True):
        show = candidates if candidates.any() else cloud.is_centre
        points = ax.scatter(
            xy[show, 0], xy[show, 1], c=values[show], cmap=cmap, s=6, alpha=0.75, linewidths=0
        )
        ax.plot(
            xy[order, 0],
            xy[order, 1],
            "-",
            color="black",
            linewidth=0.7,
            alpha=0.6,
            label="centre path",
        )
        marked = order[:: max(1, len(order) // 20)]  # at most ~20 centre markers
        ax.scatter(
            xy[marked, 0],
            xy[marked, 1],
            c="white",
            edgecolors="black",
            s=12,
            linewidths=0.5,
            zorder=3,
            label="centre",
        )
        ax.scatter(
            xy[order[-1:], 0],
            xy[order[-1:], 1],
            marker="*",
            c="red",
            s=120,
            zorder=4,
            label="last centre",
        )
        fig.colorbar(points, ax=ax, label=name)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel(f"{METHOD_NAMES[method]} 1")
        ax.set_ylabel(f"{METHOD_NAMES[method]} 2")
        ax.set_title(f"coloured by {name}", fontsize=11)
        ax.legend(fontsize=8, loc="best")
    n_models = int(candidates.sum())
    kind = (
        "candidates rebuilt from centres and noise indices"
        if log.uses_noise_table
        else ("stored candidate vectors" if log.candidates is not None else "stored centres")
    )
    models = (
        f"{n_models} {kind} and {centres_caption(cloud)}"
        if n_models
        else f"{centres_caption(cloud)} stored, no candidates logged"
    )
    text = f"{title_caption} · run {record.path.name}: {models}, {log.centre.shape[1]} parameters"
    if method == "pca":
        total = float(((cloud.params - cloud.params.mean(axis=0)) ** 2).sum())
        ratios = (xy**2).sum(axis=0) / total if total > 0 else np.zeros(2)
        text += f"; PCA axes explain {ratios[0]:.0%} and {ratios[1]:.0%} of the variance"
    return finish(
        fig,
        f"{METHOD_NAMES[method]} map of the models visited: {record.config.get('algo')} on "
        f"{record.config.get('env')}",
        text,
    )


def final_params_figure(
    runs: pd.DataFrame, records: dict[str, RunRecord], title_caption: str, method: str = "pca"
) -> Figure | None:
    """Fallback map: each run's final parameters, for the largest same-size set of runs."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import Normalize

    from harness.report.plots import finish

    rows, vectors = [], []
    for _, row in runs.iterrows():
        path = records[row["run"]].artifact_path(rundir.FINAL_PARAMS)
        if path is None:
            continue
        try:
            vector = read_npy(Path(path)).astype(np.float32)
        except PolicyLoadError:  # unreadable: the map goes on without the run
            continue
        rows.append(row)
        vectors.append(vector)
    if not vectors:
        return None
    frame = pd.DataFrame(rows).reset_index(drop=True)
    frame["dim"] = [v.size for v in vectors]
    frame["policy_key"] = frame["env"].astype(str) + "/" + frame["dim"].astype(str)
    best = frame["policy_key"].value_counts()
    if best.iloc[0] < MIN_POINTS:
        return None
    keep = frame.index[frame["policy_key"] == best.index[0]]
    subset = frame.loc[keep].reset_index(drop=True)
    xy = embed(np.stack([vectors[i] for i in keep]), method=method)
    subset["umap 1"], subset["umap 2"] = xy[:, 0], xy[:, 1]
    fig, ax = plt.subplots(figsize=(8.0, 5.6))
    scores = subset["final_eval_return"].astype(float)
    norm = Normalize(float(np.nanmin(scores)), float(np.nanmax(scores)) + 1e-9)
    markers = ["o", "X", "s", "^", "D", "P", "v", "*"]
    for i, (algo, frame) in enumerate(subset.groupby("algo", sort=True)):
        points = ax.scatter(
            frame["umap 1"],
            frame["umap 2"],
            c=frame["final_eval_return"],
            cmap="viridis",
            norm=norm,
            marker=markers[i % len(markers)],
            s=80,
            edgecolors="black",
            linewidths=0.5,
            label=str(algo),
        )
    fig.colorbar(points, ax=ax, label="final eval return")
    ax.set_xlabel(f"{METHOD_NAMES[method]} 1")
    ax.set_ylabel(f"{METHOD_NAMES[method]} 2")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(fontsize=8, loc="best", title="algorithm", title_fontsize=8)
    env = subset["env"].iloc[0]
    text = (
        f"{title_caption} · {len(subset)} runs' final parameters "
        f"({int(subset['dim'].iloc[0])} each); no population log stored"
    )
    return finish(fig, f"{METHOD_NAMES[method]} map of final models: {env}", text)
