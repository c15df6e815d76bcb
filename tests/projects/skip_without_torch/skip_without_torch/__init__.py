"""Ops that need torch at build time."""
