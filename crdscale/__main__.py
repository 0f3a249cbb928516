import signal
import sys
import threading

try:
    from crdscale.cli.main import main
except KeyboardInterrupt:  # Ctrl-C while crdscale's first modules load
    print("crdscale: interrupted", file=sys.stderr)
    sys.exit(128 + signal.SIGINT)

try:
    code = main()
    # The command is done. A Ctrl-C from here on would land in the interpreter's exit, after it has restored
    # SIGINT's default action: the process would die without a word (exit -2) when its work was whole (3 of
    # 50 random interrupts of `footprint` did). Hold it off, unless another thread still runs: the exit
    # joins it, and Ctrl-C must still stop a hung one.
    if threading.active_count() == 1:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
except KeyboardInterrupt:  # between the command's return and the block above
    print("crdscale: interrupted", file=sys.stderr)
    code = 128 + signal.SIGINT
sys.exit(code)
