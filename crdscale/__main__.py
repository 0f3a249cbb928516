import signal
import sys

try:
    from crdscale.cli.main import main
except KeyboardInterrupt:  # Ctrl-C while crdscale's first modules load
    print("crdscale: interrupted", file=sys.stderr)
    sys.exit(128 + signal.SIGINT)

sys.exit(main())
