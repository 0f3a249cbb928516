"""Function names as `go tool pprof` shows them (crdscale.analysis.pprof.names), row by row.

The expected names are what pprof 's symbolizer makes of them (the first two are in the
recorded outputs of tests/data/profiles/kube-apiserver-heap-crds0160.*.txt).
"""

from __future__ import annotations

import numpy as np
import pytest

from crdscale.analysis.pprof import names, views
from crdscale.analysis.pprof.testing import synthetic_profile

HMAC = (
    "crypto/internal/fips140/hmac.New[go.shape.interface { BlockSize() int; Reset(); Size() int; "
    "Sum([]uint8) []uint8; Write([]uint8) (int, error) }]"
)
ONCE = "sync.OnceValue[go.shape.func(*encoding/json.encodeState, reflect.Value, encoding/json.encOpts)].func1"


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        # Generic functions: every balanced (...) goes, nested ones with it.
        (
            HMAC,
            "crypto/internal/fips140/hmac.New[go.shape.interface { BlockSize int; Reset; Size int; Sum []uint8; Write  }]",
        ),
        (ONCE, "sync.OnceValue[go.shape.func].func1"),
        # The receiver of a method goes too when the name has no "]).": pprof's own quirk.
        (
            "k8s.io/kube-openapi/pkg/handler3.(*OpenAPIService).buildDiscoveryCacheLocked.Merge[go.shape.string]",
            "k8s.io/kube-openapi/pkg/handler3..buildDiscoveryCacheLocked.Merge[go.shape.string]",
        ),
        # Methods of generic types ("]).") and names without brackets stay as they are.
        ("internal/sync.(*HashTrieMap[go.shape.interface {},go.shape.interface {}]).Load", None),
        ("encoding/json.(*encodeState).marshal", None),
        ("slices.Grow[go.shape.[]uint8,go.shape.uint8]", None),
        # Java's class.<init> stays; C++ loses parameters and template arguments.
        ("java.lang.Object.<init>", None),
        ("std::vector<int>::push_back(int const&)", "std::vector::push_back"),
        # A closing parenthesis without its opening one stops the work where it is.
        ("f[x)](y)", None),
        ("f[a(b)]) (c)", "f[a]) (c)"),
        ("", None),
    ],
)
def test_pprof_name(name: str, shown: str | None):
    assert names.pprof_name(name, name) == (name if shown is None else shown)
    assert names.pprof_names(np.array([name], dtype=object), np.array([name], dtype=object))[0] == (
        name if shown is None else shown
    )


def test_a_name_that_differs_from_the_system_name_is_kept():
    """pprof takes such a name as already demangled by the writer; an empty name falls back to the system name."""
    assert names.pprof_name("short", ONCE) == "short"
    assert names.pprof_name("", ONCE) == "sync.OnceValue[go.shape.func].func1"
    assert names.pprof_name(ONCE, "") == ONCE


def test_views_show_and_filter_on_pprof_names():
    profile = synthetic_profile(
        [([ONCE, "encoding/json.Marshal", "main.main"], [3, 3000]), (["runtime.malg", "main.main"], [1, 1000])],
        [("objects", "count"), ("space", "bytes")],
    )
    table = views.top(profile, "space")
    assert "sync.OnceValue[go.shape.func].func1" in set(table["name"])
    # encOpts is only in the parameter list pprof drops: no sample matches, as pprof says.
    focused = views.top(profile, "space", focus="encOpts")
    assert focused.attrs["shown_total"] == 0 and focused.attrs["unmatched_filters"] == ["focus"]
    # "func]" is only in pprof's name (the profile's says "func(*encoding/json...").
    hidden = views.top(profile, "space", hide=r"go\.shape\.func\]")
    assert "sync.OnceValue[go.shape.func].func1" not in set(hidden["name"]) and hidden.attrs["unmatched_filters"] == []
