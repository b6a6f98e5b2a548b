import sys

from thunderlab.cli import main

sys.exit(main())
