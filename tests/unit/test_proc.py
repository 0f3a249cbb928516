def test_stop_child_kills_what_ignores_sigterm_and_reaps_it():
    import subprocess
    import sys
    import time

    from crdscale.proc import stop_child

    ignores_term = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", ignores_term], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    started = time.monotonic()
    stop_child(child, grace_s=0.3)
    assert child.returncode == -9  # SIGKILL after the grace period
    assert time.monotonic() - started < 5
    stop_child(child)  # an exited child: only reaped, no error
