"""Every UI page, form field, query parameter and path parameter under the API's input rules.

The pages come from the URL configuration (as in test_ui_matrix.py), each called by a person it serves.
A NUL character or a lone surrogate anywhere in what the person sends — a field's value or its name, a
query parameter, a path parameter — gets a 400 page that names the parameter and says nothing was changed,
and nothing is changed. Bytes that are not UTF-8 (an overlong encoding of NUL, an encoded surrogate) and
values far over any field's length never give a server error. Each call runs in a savepoint that is rolled
back, so every call sees the same data.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import pytest
from django.db import transaction
from django.test import Client

from tests.gate.routes import ui_routes
from tests.gate.test_ui_matrix import EXPECTED, FORMS, ON_THE_GUESS, fingerprint, ui_world  # noqa: F401

pytestmark = pytest.mark.django_db

# Every query parameter a UI view or its forms read; a hostile value in any other name is refused the same way.
QUERY_PARAMETERS = ("subject", "page", "tenant", "status", "code", "q", "namespace", "source", "kind", "age", "type",
                    "next", "unknown")
# Fields a POST view may read besides its form's (the return address, the subject picker, the confirmation).
POST_EXTRAS = ("next", "subject", "confirm", "ids", "unknown")
NUL = "a\x00b"
UTF7_SURROGATE = "+2AA-"  # UTF-7 for the lone surrogate U+D800
NOT_UTF8 = "a%C0%80b%ED%A0%80c%FF"  # an overlong NUL, an encoded surrogate, a byte UTF-8 never has
LONG = "x" * 100_000


def who(pattern: str, method: str) -> str:
    """A person the page serves (200 or a redirect after acting), to get past every access check."""
    by_person = EXPECTED[(pattern, method)]
    return next(p for p in ("alice", "rita", "bob", "gus") if by_person[p][0] in (200, 302))


def calls() -> list[tuple[str, str]]:
    return sorted(EXPECTED)


def _form(pattern: str, method: str, world: dict[str, Any]) -> dict[str, Any]:
    return {k: [x.format(**world) for x in v] if isinstance(v, list) else v
            for k, v in FORMS.get((pattern, method), {}).items()}


class Caller:
    def __init__(self, world: dict[str, Any], subject: Any) -> None:
        self.world, self.subject = world, subject
        self.routes = {r.pattern: r for r in ui_routes()}
        self.clients: dict[str, Client] = {}

    def client(self, person: str) -> Client:
        if person not in self.clients:
            self.clients[person] = Client()
            self.clients[person].force_login(self.world["people"][person])
        return self.clients[person]

    def url(self, pattern: str, **override: Any) -> str:
        values = {**self.world, "memory_id": self.world["guess_id"]} if pattern in ON_THE_GUESS else self.world
        return self.routes[pattern].url({**values, **override})

    def send(self, pattern: str, method: str, *, url: str | None = None, form: Any = None, query: str = "",
             content_type: str | None = None, compare: bool = True) -> tuple[Any, bool]:
        """(response, whether alice's data or the review queues changed; False when not ``compare``d)."""
        client = self.client(who(pattern, method))
        target = (url or self.url(pattern)) + (f"?{query}" if query else "")
        extra = {"CONTENT_TYPE": content_type} if content_type and method == "GET" else {}
        with transaction.atomic():
            before = fingerprint(self.subject) if compare else None
            if method == "GET":
                response = client.get(target, **extra)
            elif content_type:  # the raw bytes as given (post() would re-encode them in the named charset)
                response = client.generic("POST", target, form, content_type=content_type)
            else:
                response = client.post(target, _form(pattern, method, self.world) if form is None else form)
            changed = compare and fingerprint(self.subject) != before
            transaction.set_rollback(True)
        return response, changed


@pytest.fixture
def caller(ui_world: dict[str, Any], agent: Any) -> Caller:  # noqa: F811
    return Caller(ui_world, agent.subject)


def refused(response: Any, changed: bool, name: str, what: str = "NUL character") -> str | None:
    """Why this answer is not the refusal it must be, or None."""
    text = response.content.decode()
    if response.status_code != 400:
        return f"status {response.status_code}"
    if changed:
        return "data changed"
    if what not in text or name not in text or "Nothing was changed" not in text:
        return f"the page does not say what was wrong: {re.sub(r'<[^>]+>', ' ', text)[:300]!r}"
    return None


def test_a_nul_in_any_query_parameter_of_any_page_is_refused_with_a_message(caller: Caller) -> None:
    wrong = []
    for pattern, method in calls():
        for name in QUERY_PARAMETERS:
            response, changed = caller.send(pattern, method, query=f"{name}={quote(NUL)}")
            if (why := refused(response, changed, f"“{name}”")) is not None:
                wrong.append(f"{method} /{pattern}?{name}: {why}")
        response, changed = caller.send(pattern, method, query="a%00b=1")
        if (why := refused(response, changed, "a\\u0000b")) is not None:
            wrong.append(f"{method} /{pattern} with a NUL in a parameter's name: {why}")
    assert wrong == []


def test_a_nul_in_any_form_field_of_any_action_is_refused_and_nothing_changes(caller: Caller) -> None:
    wrong = []
    posts = [(p, m) for p, m in calls() if m == "POST"]
    assert ("me/delete-selected", "POST") in posts and ("review/bulk", "POST") in posts
    for pattern, method in posts:
        form = _form(pattern, method, caller.world)
        for name in {*form, *POST_EXTRAS}:
            response, changed = caller.send(pattern, method, form={**form, name: NUL})
            if (why := refused(response, changed, f"“{name}”")) is not None:
                wrong.append(f"POST /{pattern} {name}: {why}")
        if "ids" in form:  # one good id and one bad: nothing of the selection is acted on
            response, changed = caller.send(pattern, method, form={**form, "ids": [*form["ids"], NUL]})
            if (why := refused(response, changed, "“ids”")) is not None:
                wrong.append(f"POST /{pattern} ids=[good, bad]: {why}")
        response, changed = caller.send(pattern, method, form={**form, NUL: "1"})
        if (why := refused(response, changed, "a\\u0000b")) is not None:
            wrong.append(f"POST /{pattern} with a NUL in a field's name: {why}")
    assert wrong == []


def test_a_lone_surrogate_sent_in_a_charset_that_can_encode_one_is_refused(caller: Caller) -> None:
    wrong = []
    boundary = "engram-boundary"
    for pattern, method in calls():
        form = _form(pattern, method, caller.world)
        name = next(iter(form), "next")
        if method == "POST":  # Django decodes a multipart body in the charset the request names
            body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{UTF7_SURROGATE}\r\n"
                    f"--{boundary}--\r\n").encode()
            response, changed = caller.send(pattern, method, form=body,
                                            content_type=f"multipart/form-data; boundary={boundary}; charset=utf-7")
        else:
            response, changed = caller.send(pattern, method, query=f"{name}={UTF7_SURROGATE}",
                                            content_type="text/plain; charset=utf-7")
        if (why := refused(response, changed, f"“{name}”", "lone surrogate (\\ud800)")) is not None:
            wrong.append(f"{method} /{pattern} {name}: {why}")
    assert wrong == []


def test_a_form_body_in_another_charset_than_utf8_is_refused_with_a_readable_page(caller: Caller) -> None:
    wrong = []
    for pattern, method in calls():
        if method != "POST":
            continue
        response, changed = caller.send(pattern, method, form=b"ids=+2AA-&next=+2AA-",
                                        content_type="application/x-www-form-urlencoded; charset=utf-7")
        if (why := refused(response, changed, "UTF-8", "could not be read")) is not None:
            wrong.append(f"POST /{pattern}: {why}")
    assert wrong == []


def test_a_nul_in_any_path_parameter_is_refused_and_huge_numbers_find_nothing(caller: Caller) -> None:
    wrong = []
    for pattern, method in calls():
        names = re.findall(r"<(\w+):(\w+)>", pattern)
        for converter, name in names:
            if converter == "str":
                response, changed = caller.send(pattern, method, url=caller.url(pattern, **{name: quote(NUL)}))
                if (why := refused(response, changed, f"“{name}”")) is not None:
                    wrong.append(f"{method} /{pattern} {name}: {why}")
            else:
                response, changed = caller.send(pattern, method, url=caller.url(pattern, **{name: 10**20}))
                if response.status_code >= 500 or changed:  # not found (404, or a redirect with a message)
                    wrong.append(f"{method} /{pattern} {name}=10**20: {response.status_code} changed={changed}")
    assert wrong == []


def test_bytes_that_are_not_utf8_and_overlong_values_never_give_a_server_error(caller: Caller) -> None:
    wrong = []
    for pattern, method in calls():
        form = _form(pattern, method, caller.world)
        names = [*form, *POST_EXTRAS] if method == "POST" else list(QUERY_PARAMETERS)
        for name in names:
            if method == "POST":
                body = "&".join(f"{k}={quote(v if isinstance(v, str) else v[0])}" for k, v in form.items() if k != name)
                response, _ = caller.send(pattern, method, form=f"{body}&{name}={NOT_UTF8}".encode(),
                                          content_type="application/x-www-form-urlencoded", compare=False)
            else:
                response, _ = caller.send(pattern, method, query=f"{name}={NOT_UTF8}", compare=False)
            if response.status_code >= 500:
                wrong.append(f"{method} /{pattern} {name}={NOT_UTF8}: {response.status_code}")
            if method == "POST":
                response, _ = caller.send(pattern, method, form={**form, name: LONG}, compare=False)
            else:
                response, _ = caller.send(pattern, method, query=f"{name}={LONG}", compare=False)
            if response.status_code >= 500:
                wrong.append(f"{method} /{pattern} {name}=<100,000 characters>: {response.status_code}")
    assert wrong == []
