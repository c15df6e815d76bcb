"""Device code in compressed offload bundles."""
