"""The benchmark's tables (BENCHMARKS.md sections) and plots, from :func:`run_benchmarks`."""

from __future__ import annotations

import math
import os
import re

from daskpd.bench.data import METRIC_LABELS, data_label
from daskpd.bench.protocol import LADDER, missed_text, peer_of, time_text


def _cell(values, median, line=None, primal_known=True) -> str:
    """A median with its spread, or why it has none ("not reached (budget S s)" only when
    the runs that missed the line ran out of their budget) with how many runs reached it."""
    finite = [v for v in values if math.isfinite(v)]
    if not values:
        return "—"
    if math.isinf(median):
        return f"{missed_text(line or {}, primal_known)} ({len(finite)}/{len(values)})"
    if len(values) == 1:
        return f"{median:.3g}"
    return f"{median:.3g} ({min(finite):.3g}–{max(finite):.3g})"


def _number(value, digits=3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}g}"


#: Columns after the method and its status.
_COLUMNS = len(LADDER) + 7


#: An absolute path in a failed row's reason (the bench's work directory on the machine that
#: ran it): printed as its last part, so that no machine path reaches a published table.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.])/(?:[^\s/`'\"]+/)+([^\s/`'\"]+)")


def _row(row) -> str:
    name = row["method"]
    if row["status"] != "ok":
        reason = _ABSOLUTE_PATH.sub(r"\1", row["reason"])
        status = f"{row['status']}: {reason}"
        return f"| {name} | {status} |" + " |" * _COLUMNS
    summary = row["summary"]
    lines = summary["lines"]
    known = summary.get("primal_known", True)
    cells = [
        _cell(lines[repr(eps)]["wall"], lines[repr(eps)]["median_wall"], lines[repr(eps)], known)
        for eps in LADDER
    ]
    epochs = lines[repr(1e-3)]
    chosen = summary["chosen"]
    metrics = chosen["metrics"]
    metric = _number(chosen["metric"], 4)
    if len(metrics) > 1 and all(math.isfinite(m) for m in metrics):
        metric += f" ({min(metrics):.4f}–{max(metrics):.4f})"
    rss = summary["peak_rss_bytes"] / 2**30 if summary["peak_rss_bytes"] else math.nan
    return (
        f"| {name} | ok | " + " | ".join(cells) + " | "
        f"{_cell(epochs['epochs'], epochs['median_epochs'], epochs, known)} | "
        f"{_from_files_cell(summary)} | {chosen['rule']} | "
        f"{_number(chosen['wall_seconds'])} | {_number(chosen['suboptimality'])} | {metric} | "
        f"{_number(rss)} |"
    )


def _from_files_cell(summary) -> str:
    runs = summary.get("from_files_runs") or []
    measured = [v for v in runs if not math.isnan(v)]
    if not measured:
        return "—"
    median = summary["from_files"]
    if math.isnan(median):  # some runs not measured: the median of those that were
        import statistics

        median = statistics.median(measured)
    if math.isinf(median):
        return f"not certified ({sum(map(math.isfinite, measured))}/{len(measured)})"
    return _cell(measured, median)


def _start_rows(row) -> list[str]:
    """DSO's rows apart: its CoCoA+ start alone (epoch 0) and its own epochs after it."""
    start = row.get("summary", {}).get("start") if row["status"] == "ok" else None
    if start is None or not row["method"].startswith("daskpd dso"):
        return []
    out = []
    for key, label in (("lines", "its start alone (epoch 0)"),
                       ("own_lines", "its own epochs, s after the start")):  # fmt: skip
        lines = start[key]
        cells = [
            _cell(lines[repr(eps)]["wall"], lines[repr(eps)]["median_wall"], lines[repr(eps)])
            for eps in LADDER
        ]
        extra = (
            f"start ends at {_number(start['seconds'])} s, P/P* - 1 = "
            f"{_number(start['suboptimality'])}"
            if key == "lines"
            else ""
        )
        out.append(
            f"| {row['method']}: {label} | ok | "
            + " | ".join(cells)
            + f" | | | {extra} |"
            + " |" * 4
        )
    return out


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
        f"| method | status | {header} | epoch clock s to (1+0.001)P* | from files s to "
        f"(1+0.001)P* | stopping rule | its s | its P/P* - 1 | its test {label} | "
        "peak RSS (GiB) |",
        "| --- " * (_COLUMNS + 2) + "|",
    ]
    for row in table["methods"]:
        lines += [_row(row), *_start_rows(row)]
    lines += ["", "Targets (computed from the rows above, warm clock):", ""]
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
    lines = [
        f"## {title}",
        "",
        f"Command: `{command}`",
        "",
        f"Data: {data_label(config['dataset'])}. {machine_text(results)}",
        "",
        f"Protocol: every time is wall seconds, the true median of {config['repeats']} runs "
        "(first run included) with the spread (min–max) in brackets, the methods taking turns "
        "within each repeat. Warm clock (the line columns and the targets): daskpd's rows "
        f"are the user's second `solve` call on a fresh LocalCluster of {config['workers']} "
        f"worker processes with memory_limit={config['memory_limit']}, as in a notebook (the "
        "cluster's start and a first call on the training set's first 2,000 rows, which "
        "loads the workers' kernels, excluded; the data's reads, start, epochs, evaluation "
        "and gathering the model's `w` to the client in), the solver's defaults; the 'epoch "
        "clock' column "
        "counts start and epochs only. Peers: their fit on data already in memory, over a "
        "ladder of efforts (tolerances down to 1e-6, passes), with "
        f"{config['workers']} threads for the multi-core ones; liblinear has a row per "
        "solver of the loss (logistic: `-s 0`, primal Newton, and `-s 7`, dual coordinate "
        "descent), Snap ML one per formulation (logistic: its dual and its primal solver). "
        "From-files clock: a fresh `daskpd train` process on the store (imports, "
        "cluster start, read, training to a certificate of the line, model written) "
        "against each peer's fresh process loading its `.npz` of CSR arrays and fitting at "
        "its cheapest rung to the line. A missed line reads "
        f"'not reached (budget {config['budget']:g} s)' only when the runs that missed it "
        "ran out of their time budget; a peer whose ladder of efforts ended first reads "
        "'ladder ended at ...' and decides nothing against it, unless its last two rungs' "
        "models were the same (to 1e-6): it then reads 'settled at P/P* - 1 = ...', a point "
        "of its own above the line, missed for good; (k/n): runs that reached the "
        "line. Stopping rule: the model a run would have returned without the test set "
        f"(daskpd: the first certificate with gap <= {config['rule_tol']:g} P; a peer: its "
        "own default), its wall seconds, suboptimality and test metric. 'daskpd dso' has "
        "two more rows: its CoCoA+ start alone (epoch 0) and its own epochs timed from the "
        "start's end.",
        "",
    ]
    for table in results["tables"]:
        lines += table_markdown(table, config)
    return "\n".join(lines)


def machine_text(results: dict) -> str:
    """The machine of a run, its load and the commit measured, as one sentence or two."""
    machine = results["machine"]
    text = (
        f"Machine: {machine['cpus']} cores, {machine['memory_gib']} GiB, Python {machine['python']}"
    )
    if machine.get("commit"):
        text += f"; commit {machine['commit']}"
    text += "."
    load = machine.get("load_average")
    if load:
        text += (
            f" Load average (1 min) at the start of the run: {load[0]:.1f}"
            + (f", at its end: {load[1]:.1f}" if len(load) > 1 else "")
            + "."
        )
    if results.get("note"):
        text += f" {results['note']}"
    return text


#: The README's generated results (:func:`readme_results`) sit between these markers.
README_MARKERS = ("<!-- results: {name} -->", "<!-- end results: {name} -->")


def readme_results(results: dict, command: str | None = None) -> str:
    """The README's results of one run: one row per table, every number from ``results``.

    The default solver, each peer's fastest row, and the computed line against the fastest
    peer, on the warm clock; the from-files clock beside it.
    """
    config = results["config"]
    command = command or command_of(config)
    workers = config["workers"]
    lines = [
        f"`{command}` ({machine_text(results)}) Seconds to a model within `(1 + 1e-3) P*`, "
        "true medians; warm: a fresh cluster's second call (its first, on 2,000 rows, loaded "
        "the kernels), the data read in the call / peers' data in memory; from files: fresh "
        "processes from the data on disk:",
        "",
        "| nonzeros, loss, alpha | default solver, warm | liblinear (1 core) | multi-core "
        f"LIBLINEAR ({workers} threads) | Snap ML ({workers} threads) | from files: default "
        "/ fastest peer | no slower than the fastest peer (computed) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for table in results["tables"]:
        rows = table["methods"]
        default = next((row for row in rows if row["method"] == table["default"]), None)

        def fastest(peer, rows=rows):
            mine = [row for row in rows if peer_of(row) == peer and row["status"] == "ok"]
            if not mine:
                return None
            return min(mine, key=lambda row: row["summary"]["lines"][repr(1e-3)]["median_wall"])

        def said(row, named=False):
            if row is None:
                return "not in the run"
            text = time_text(row, 1e-3)
            return f"{text} ({row['method']})" if named else text

        peers = [row for row in rows if peer_of(row) is not None and row["status"] == "ok"]
        files = [row for row in peers if math.isfinite(row["summary"].get("from_files", math.nan))]
        best_files = min(files, key=lambda row: row["summary"]["from_files"], default=None)
        mine_files = default["summary"].get("from_files", math.nan) if default else math.nan
        files_text = f"{_number(mine_files)} s / " + (
            f"{best_files['summary']['from_files']:.3g} s ({best_files['method']})"
            if best_files
            else "—"
        )
        verdict = next(
            (line.split(": ", 1)[1] for line in table["lines"] if "the fastest peer" in line),
            "not computed",
        )
        verdict = verdict.split(":", 1)[0]
        lines.append(
            f"| {table['nnz']:.0e}, {table['loss']}, {table['alpha']:g} ({table['alpha_source']})"
            f" | {said(default)} | {said(fastest('liblinear'), named=True)} | "
            f"{said(fastest('liblinear-mc'))} | {said(fastest('snapml'))} | {files_text} | "
            f"{verdict} |"
        )
    return "\n".join(lines)


def replace_readme_results(path: str, name: str, text: str) -> None:
    """Replace the README's generated results ``name`` (between :data:`README_MARKERS`)."""
    from daskpd.data.atomic import write_text_atomic

    with open(path) as handle:
        content = handle.read()
    start_marker, end_marker = (marker.format(name=name) for marker in README_MARKERS)
    for marker in (start_marker, end_marker):
        if marker not in content:
            raise ValueError(f"{path} has no {marker!r} marker")
    start = content.index(start_marker) + len(start_marker)
    end = content.index(end_marker)
    write_text_atomic(path, content[:start] + "\n" + text.rstrip() + "\n" + content[end:])


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
