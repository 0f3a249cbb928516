"""Durable storage for the run directories of cells run away from this machine (see :mod:`.store`)."""
