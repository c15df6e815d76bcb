"""``check``: wheels or an installed environment judged against the GPUs."""
