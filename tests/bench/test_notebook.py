"""The splice-site notebook executes end to end (nbclient) and is committed without outputs."""

from __future__ import annotations

import os

import nbformat
import pytest

NOTEBOOK = os.path.join(
    os.path.dirname(__file__), "..", "..", "notebooks", "splice_site.ipynb"
)


def test_notebook_is_committed_without_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells
    for cell in code_cells:
        assert cell.outputs == []
        assert cell.execution_count is None


@pytest.mark.cluster
@pytest.mark.long  # a Jupyter kernel and its LocalCluster: CI's second call (-m long)
def test_notebook_executes(monkeypatch):
    from nbclient import NotebookClient

    # Small settings so that the run (cluster start-up included) stays well under a minute.
    monkeypatch.setenv("DASKPD_NB_EPOCHS", "8")
    monkeypatch.setenv("DASKPD_NB_DEGREE", "4")
    monkeypatch.setenv("DASKPD_NB_HASH_BITS", "12")
    monkeypatch.delenv("DASKPD_SCHEDULER", raising=False)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=240,
        kernel_name="python3",
        resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}},
    )
    client.execute()

    text = []
    images = 0
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            assert output.get("output_type") != "error", output
            text.append(output.get("text", ""))
            data = output.get("data", {})
            text.append(data.get("text/plain", ""))
            text.append(data.get("text/html", ""))
            images += "image/png" in data
    joined = "\n".join(text)
    assert "dashboard: http" in joined
    assert "liblinear" in joined and "daskpd DSO" in joined
    assert "test AUPRC" in joined
    assert images >= 1
