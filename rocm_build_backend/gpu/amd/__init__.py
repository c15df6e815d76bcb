"""AMD ROCm: KFD sysfs and ROCm tool probes, and what they report."""
