"""``thin`` and ``split``: wheels whose device code is cut to the given targets."""
