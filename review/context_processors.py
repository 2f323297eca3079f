"""``nav``: which parts of the UI the signed-in person may use, so the header links only to those."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.http import HttpRequest

from memory.identity.access import owns_any, reviews_any


class Navigation:
    """Evaluated lazily: a page that never shows the header runs no query for it."""

    def __init__(self, user: Any) -> None:
        self.user = user

    @cached_property
    def memories(self) -> bool:
        return owns_any(self.user)

    @cached_property
    def reviews(self) -> bool:
        return reviews_any(self.user)

    @property
    def overview(self) -> bool:
        return bool(self.user.is_authenticated) and (bool(self.user.is_staff) or self.reviews)


def navigation(request: HttpRequest) -> dict[str, Navigation]:
    return {"nav": Navigation(request.user)}
