"""``python -m delayqueue.cli``: the same command as ``delayqueue``."""

import sys

from delayqueue.cli import main

sys.exit(main())
