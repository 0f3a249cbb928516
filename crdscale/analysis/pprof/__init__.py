"""pprof profiles in pandas, with the numbers ``go tool pprof`` prints.

- :mod:`.decode`: ``profile.proto`` (gzip or plain) to a :class:`Profile` of tables.
- :mod:`.names`: function names as pprof shows and filters them (generic functions shortened).
- :mod:`.select`: which samples and frames count (focus, ignore, show, hide, tagfocus).
- :mod:`.graph`: nodes at a granularity, flat/cum, call edges, pprof's node order.
- :mod:`.views`: the ``top``, ``peek`` and ``diff`` tables.
- :mod:`.text`: pprof's text output (units, percentages, headers).
- :mod:`.testing`: fixture builders for tests (synthetic, trimmed, re-encoded profiles).
"""

from crdscale.analysis.pprof.decode import Profile, ProfileMeta, ValueType, parse_profile
from crdscale.analysis.pprof.select import Filters, select_samples
from crdscale.analysis.pprof.text import format_peek, format_top, percentage, pprof_notes, scaled_label
from crdscale.analysis.pprof.views import TOP_COLUMNS, diff, peek, top

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
