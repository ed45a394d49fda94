"""Running the ``daskpd`` command in the test's process, as a user's shell would."""

from __future__ import annotations

from daskpd.cli import main


def run_cli(capsys, *argv):
    """``daskpd argv...``: its exit code, standard output and standard error."""
    try:
        code = main([str(arg) for arg in argv])
    except SystemExit as exit_info:
        code = exit_info.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err
