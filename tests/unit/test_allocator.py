"""crdscale's own processes keep freed numpy temporaries for reuse (glibc malloc settings)."""

import platform
import subprocess
import sys

import pytest

from crdscale import allocator


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_the_settings_take_on_glibc():
    # In a child process: the test runner's own allocator stays as it was.
    code = "from crdscale.allocator import keep_freed_memory; print(keep_freed_memory())"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "True"
    )


def test_other_c_libraries_are_left_alone(monkeypatch):
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("", ""))
    assert allocator.keep_freed_memory() is False


def test_the_heap_threshold_is_one_glibc_accepts():
    # glibc refuses an mmap threshold above 32 MiB on 64-bit (HEAP_MAX_SIZE / 2).
    assert allocator.MMAP_THRESHOLD_BYTES <= 32 << 20 <= allocator.TRIM_THRESHOLD_BYTES
