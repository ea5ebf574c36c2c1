"""``python -m bench.kueue_scheduler``: the same as ``bench/kueue_scheduler/run.py``."""

import sys

from bench.kueue_scheduler.run import main

sys.exit(main())
