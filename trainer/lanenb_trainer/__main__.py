"""``python -m lanenb_trainer ...``: the one entry point every launcher runs on every rank."""

import sys

from lanenb_trainer.train import main

if __name__ == "__main__":
    sys.exit(main())
