"""``python -m lanenb.sweeps NAME``: the detached sweep driver (lanenb.sweeps.driver)."""

import sys

from lanenb.sweeps.driver import main

sys.exit(main())
