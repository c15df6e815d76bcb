"""Wheel variants (WheelNext drafts): properties from the audit, and file names."""
