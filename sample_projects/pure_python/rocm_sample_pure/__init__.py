"""A pure-Python package: nothing here is compiled."""


def greet(name: str) -> str:
    return f"hello, {name}"
