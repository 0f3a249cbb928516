"""Where the run directories of an experiment's cells end up: a results store by URL
(:func:`crdscale.results.store.open_store`)."""
