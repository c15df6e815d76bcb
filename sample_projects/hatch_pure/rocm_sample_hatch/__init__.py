"""A pure-Python package built with hatchling."""


def greet(name: str) -> str:
    return f"hello, {name}"
