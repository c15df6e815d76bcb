"""A HIP library built by hipcc with a hard-coded target list."""
