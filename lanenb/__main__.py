import sys

from lanenb.cli import main

sys.exit(main())
