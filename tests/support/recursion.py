"""Running code under Python's default recursion limit, whatever the test runner set."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def default_recursion_limit() -> Iterator[None]:
    """Python's default limit (1,000 frames): code that recurses per term of a long chain fails."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        yield
    finally:
        sys.setrecursionlimit(before)
