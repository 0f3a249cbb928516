"""The choices of installing and serving CRDs, with no HTTP client imported: ``crdscale install --help``
and the scenario's validation show them without loading ``requests``."""

# After each step: LIST each new resource, keep a client-go informer on it, or nothing.
SERVE_MODES = ("none", "list", "watch")
# Refuse to hold more watches than this: each is a socket here and an etcd watch plus a cache watcher on the server.
DEFAULT_MAX_WATCHES = 5000
# A CRD already on the server: leave it, update it (only crdscale's own), or fail.
EXISTING_MODES = ("skip", "update", "fail")
# The server rejects a CRD: go on with the rest, or stop.
ERROR_MODES = ("continue", "stop")
