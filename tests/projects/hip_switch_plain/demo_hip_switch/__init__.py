"""Adds one on the GPU when built with DEMO_WITH_HIP=1."""
