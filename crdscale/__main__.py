import sys

from crdscale.cli.main import main

sys.exit(main())
