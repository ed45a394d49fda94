"""The benchmark's tables (BENCHMARKS.md sections) and plots, from :func:`run_benchmarks`."""

from __future__ import annotations

import math
import os

from daskpd.bench.data import METRIC_LABELS, data_label
from daskpd.bench.protocol import LADDER


def _cell(values, median) -> str:
    """A median with its spread, or "not reached" with how many runs reached the line."""
    finite = [v for v in values if math.isfinite(v)]
    if not values:
        return "—"
    if math.isinf(median):
        return f"not reached ({len(finite)}/{len(values)})"
    if len(values) == 1:
        return f"{median:.3g}"
    return f"{median:.3g} ({min(finite):.3g}–{max(finite):.3g})"


def _number(value, digits=3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}g}"


def _row(row) -> str:
    name = row["method"]
    if row["status"] != "ok":
        status = f"{row['status']}: {row['reason']}"
        return f"| {name} | {status} |" + " |" * (len(LADDER) + 6)
    summary = row["summary"]
    lines = summary["lines"]
    cells = [_cell(lines[repr(eps)]["wall"], lines[repr(eps)]["median_wall"]) for eps in LADDER]
    epochs = lines[repr(1e-3)]
    chosen = summary["chosen"]
    metrics = chosen["metrics"]
    metric = _number(chosen["metric"], 4)
    if len(metrics) > 1 and all(math.isfinite(m) for m in metrics):
        metric += f" ({min(metrics):.4f}–{max(metrics):.4f})"
    rss = summary["peak_rss_bytes"] / 2**30 if summary["peak_rss_bytes"] else math.nan
    return (
        f"| {name} | ok | " + " | ".join(cells) + " | "
        f"{_cell(epochs['epochs'], epochs['median_epochs'])} | {chosen['rule']} | "
        f"{_number(chosen['wall_seconds'])} | {_number(chosen['suboptimality'])} | {metric} | "
        f"{_number(rss)} |"
    )


def table_markdown(table: dict, config: dict) -> list[str]:
    """The lines of one table: its heading, P*, the rows and the computed target lines."""
    label = METRIC_LABELS[table["metric"]]
    reference = table["reference"]
    positives = (
        f", {100 * table['positive_rate']:.1f}% positives" if table["metric"] == "auprc" else ""
    )
    lines = [
        f"### {table['nnz']:.2e} nonzeros, {table['loss']}, alpha = {table['alpha']:g} "
        f"({table['alpha_source']})",
        "",
        f"{table['n_samples']} x {table['n_features']} training rows, {table['n_valid']} "
        f"validation and {table['n_test']} test rows{positives}. "
        + _partition_text(table.get("partition_seconds", 0.0)),
        "",
        f"P* = {table['p_star']:.8g}: {reference['source']}, {reference['seconds']:.3g} s. "
        + _certificate_text(reference),
        "",
    ]
    if table.get("validation"):
        grid = ", ".join(f"{row['alpha']:g}: {row['metric']:.4f}" for row in table["validation"])
        lines += [f"Validation {label} of liblinear (tol 1e-3) over the alpha grid: {grid}.", ""]
    header = " | ".join(f"s to (1+{eps:g})P*" for eps in LADDER)
    lines += [
        f"| method | status | {header} | epoch clock s to (1+0.001)P* | stopping rule | "
        f"its s | its P/P* - 1 | its test {label} | peak RSS (GiB) |",
        "| --- " * (len(LADDER) + 8) + "|",
    ]
    lines += [_row(row) for row in table["methods"]]
    lines += ["", "Targets (computed from the rows above):", ""]
    lines += [f"- {line}" for line in table["lines"]]
    return lines + [""]


def _partition_text(seconds) -> str:
    if not seconds:
        return ""
    return (
        f"DSO's tiled layout was stored once before the runs (`daskpd partition`, {seconds:.3g} s)."
    )


def _certificate_text(reference) -> str:
    parts = []
    if math.isfinite(reference.get("certified_within", math.nan)):
        parts.append(
            f"The best certified dual of daskpd's runs puts the optimum within "
            f"{reference['certified_within']:.2g} (relative) below it."
        )
    # differences in the last digits of the sums are not a method beating the reference
    if reference.get("below", 0.0) > 1e-9:
        parts.append(
            f"A method reached {reference['below']:.2g} (relative) below it: the lines at that "
            "level are not exact."
        )
    return " ".join(parts)


def command_of(config: dict) -> str:
    """The ``daskpd bench`` command that measures ``config`` again (the work directory and
    the output options left to the user)."""
    parts = [
        "daskpd bench",
        f"--dataset {config['dataset']}",
        f"--scales {','.join(f'{s:.0e}'.replace('+0', '') for s in config['scales'])}",
        f"--loss {config['loss']}",
        f"--alpha {config['alpha']:g}",
        "--alpha-grid "
        + (",".join(f"{a:g}" for a in config["alpha_grid"]) if config["alpha_grid"] else "none"),
        f"--repeats {config['repeats']}",
        f"--budget {config['budget']:g}",
        f"--rule-tol {config['rule_tol']:g}",
        f"--workers {config['workers']}",
        f"--memory-limit {config['memory_limit']}",
        f"--peers {','.join(config['peers'])}",
    ]
    if config.get("solvers"):
        parts.append(f"--solvers {','.join(config['solvers'])}")
    if "dask-ml" in config["peers"]:
        parts.append(f"--dask-ml-iters {','.join(str(k) for k in config['dask_ml_iters'])}")
    return " ".join(parts)


def markdown(results: dict, command: str | None = None, title: str = "Against peers") -> str:
    """Render :func:`daskpd.bench.run_benchmarks` results as a BENCHMARKS.md section.

    ``command`` defaults to :func:`command_of` the results' configuration.
    """
    config = results["config"]
    command = command or command_of(config)
    machine = results["machine"]
    lines = [
        f"## {title}",
        "",
        f"Command: `{command}`",
        "",
        f"Data: {data_label(config['dataset'])}. Machine: {machine['cpus']} cores, "
        f"{machine['memory_gib']} GiB, Python {machine['python']}.",
        "",
        f"Protocol: every time is wall seconds, the true median of {config['repeats']} runs "
        "(first run included) with the spread (min–max) in brackets, the methods taking turns "
        "within each repeat. daskpd's rows: the user's "
        f"`solve` call on a fresh LocalCluster of {config['workers']} worker processes with "
        f"memory_limit={config['memory_limit']} (the cluster's start excluded; data reads, "
        "compilation, start, epochs and evaluation in), the solver's defaults; the 'epoch "
        "clock' column counts start and epochs only. Peers: their fit on data already in "
        f"memory, over a ladder of efforts (tolerances, passes), with {config['workers']} "
        "threads for the multi-core ones. 'not reached (k/n)': fewer than half of the runs "
        f"reached the line within the budget ({config['budget']:g} s a run). Stopping rule: "
        "the model a run would have returned without the test set (daskpd: the first "
        f"certificate with gap <= {config['rule_tol']:g} P; a peer: its own default), its "
        "wall seconds, suboptimality and test metric.",
        "",
    ]
    for table in results["tables"]:
        lines += table_markdown(table, config)
    return "\n".join(lines)


def plot(results: dict, directory: str) -> list[str]:
    """One PNG per table: relative suboptimality against wall seconds, median run per method."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError(
            "the benchmark's figures need matplotlib: pip install 'daskpd[bench]'"
        ) from exc

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for table in results["tables"]:
        p_star = table["p_star"]
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        for row in table["methods"]:
            if row["status"] != "ok" or not row["runs"]:
                continue
            runs = sorted(row["runs"], key=lambda run: run["points"][-1][0] if run["points"] else 0)
            points = [p for p in runs[len(runs) // 2]["points"] if math.isfinite(p[2])]
            if not points:
                continue
            gaps = [max((p[2] - p_star) / abs(p_star), 1e-8) for p in points]
            ax.plot([p[0] for p in points], gaps, marker="o", markersize=3, label=row["method"])
        for eps in LADDER:
            ax.axhline(eps, color="grey", linewidth=0.5, linestyle="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("wall seconds")
        ax.set_ylabel("P / P* - 1")
        ax.set_title(f"{table['loss']}, {table['nnz']:.1e} nonzeros, alpha {table['alpha']:g}")
        ax.legend(fontsize=7)
        name = f"bench-{table['loss']}-{table['nnz']:.0e}-alpha{table['alpha']:g}.png"
        path = os.path.join(directory, name.replace("+", ""))
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def section_span(content: str, section: str, where: str) -> tuple[int, int]:
    """Where the text of section ``section`` starts and ends in ``content``.

    Raises
    ------
    ValueError
        Naming ``where`` and the missing marker.
    """
    markers = (f"<!-- section: {section} -->", f"<!-- end: {section} -->")
    for marker in markers:
        if marker not in content:
            raise ValueError(f"{where} has no {marker!r} marker (section {section!r})")
    return content.index(markers[0]) + len(markers[0]), content.index(markers[1])


def replace_section(markdown_path: str, section: str, text: str) -> None:
    """Replace the text between ``<!-- section: NAME -->`` and ``<!-- end: NAME -->``."""
    from daskpd.data.atomic import write_text_atomic

    with open(markdown_path) as handle:
        content = handle.read()
    start, end = section_span(content, section, markdown_path)
    write_text_atomic(markdown_path, content[:start] + "\n" + text.rstrip() + "\n" + content[end:])
