"""``python -m daskpd.cli``: the ``daskpd`` command."""

import sys

from daskpd.cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
