"""The worker logging of the LocalClusters daskpd starts: a Dask preload (``dask_setup``).

A task that fails on damaged input (an altered chunk of a store, a model array that fails its
checksum) raises one of daskpd's input errors; the client reports it as one line naming the
file, and the command stops there. The worker's own "Compute Failed" record, nine lines with
the task's traceback, says the same thing again, so for those errors it is dropped, as is the
warning of a task that the cluster's close right after cancelled ("Async instruction ...
ended with CancelledError"). Any other failure is logged as Dask logs it. Clusters the user
gives (``--scheduler``) keep their own logging.
"""

from __future__ import annotations

import logging

#: daskpd's errors about its input, by class name (a worker's log record holds the
#: exception's text only): each is a ``ValueError`` whose message names the file.
INPUT_ERRORS = frozenset(
    {
        "DatasetIntegrityError",
        "CorruptStoreError",
        "CompressedInputError",
        "SvmlightFormatError",
        "SequenceFormatError",
    }
)

#: The loggers of the two records (distributed.worker and its state machine).
_LOGGERS = ("distributed.worker", "distributed.worker.state_machine")


class ReportedByTheClient(logging.Filter):
    """Drop what the client reports itself: a task's failure on daskpd's input errors, and a
    task cancelled by the worker's close."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg if isinstance(record.msg, str) else ""
        args = record.args if isinstance(record.args, tuple) else ()
        if message.startswith("Compute Failed") and len(args) > 3:
            # args[3] is repr(exception): "DatasetIntegrityError('...')"
            return str(args[3]).split("(", 1)[0] not in INPUT_ERRORS
        if message.startswith("Async instruction for") and message.endswith(
            "ended with CancelledError"
        ):
            return False
        return True


def install() -> None:
    """Add :class:`ReportedByTheClient` to the workers' loggers of this process (once)."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(item, ReportedByTheClient) for item in logger.filters):
            logger.addFilter(ReportedByTheClient())


def dask_setup(worker) -> None:
    """Dask's preload hook, run in each worker process when it starts."""
    install()
