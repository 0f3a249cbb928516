"""pprof profiles in pandas, with the numbers ``go tool pprof`` prints.

- :mod:`.options`: the choices and defaults of pprof's options (no pandas).
- :mod:`.decode`: ``profile.proto`` (gzip or plain) to a :class:`Profile` of tables.
- :mod:`.names`: function names as pprof shows and filters them (generic functions shortened).
- :mod:`.select`: which samples and frames count (focus, ignore, show, hide, tagfocus).
- :mod:`.graph`: nodes at a granularity, flat/cum, call edges, pprof's node order.
- :mod:`.views`: the ``top``, ``peek`` and ``diff`` tables.
- :mod:`.measurement`: pprof's unit scaling, scaled labels and percentages.
- :mod:`.text`: pprof's text output (headers, ``-top`` and ``-peek``).
- :mod:`.testing`: fixture builders for tests (synthetic, trimmed, re-encoded profiles).
"""

import importlib

# Each public name -> the submodule defining it, imported on first use (PEP 562): the submodules
# need pandas, and `crdscale top --help` imports this package for its option choices only.
_EXPORTS = {
    "Profile": "decode",
    "ProfileMeta": "decode",
    "ValueType": "decode",
    "parse_profile": "decode",
    "Filters": "select",
    "select_samples": "select",
    "format_peek": "text",
    "format_top": "text",
    "percentage": "measurement",
    "pprof_notes": "text",
    "scaled_label": "measurement",
    "TOP_COLUMNS": "views",
    "diff": "views",
    "peek": "views",
    "top": "views",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "Filters",
    "Profile",
    "ProfileMeta",
    "TOP_COLUMNS",
    "ValueType",
    "diff",
    "format_peek",
    "format_top",
    "pprof_notes",
    "parse_profile",
    "peek",
    "percentage",
    "scaled_label",
    "select_samples",
    "top",
]
