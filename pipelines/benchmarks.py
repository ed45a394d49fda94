"""Benchmarks against peers: a thin program over :mod:`daskpd.bench`.

Same options as ``daskpd bench`` (``python pipelines/benchmarks.py --help``). Example, as
recorded in BENCHMARKS.md::

    python pipelines/benchmarks.py --scales 1e7 --loss hinge --repeats 3 --markdown BENCHMARKS.md \\
        --section peers-hinge
"""

import sys

from daskpd.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
