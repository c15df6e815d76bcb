"""What a wheel holds and where it may go: its targets (stamp first, audit when there is
none), stamping and the atomic rewrite, ``check``, ``cache``, ``index`` and the import guard.
"""
