"""pip's and uv's wheel caches: where they are, what each entry holds, what a purge removes."""
