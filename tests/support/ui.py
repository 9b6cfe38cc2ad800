"""Signing a TestClient into the dashboard as a browser does: open the sign-in page (its sign-in cookie and form
token), then post the form with the token."""

from __future__ import annotations

import re


def sign_in(client, token: str, next_path: str = "/ui/audits"):  # noqa: ANN001, ANN201 (a TestClient, a Response)
    page = client.get("/ui/signin")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    return client.post("/ui/signin", data={"token": token, "next": next_path, "csrf": csrf}, follow_redirects=False)
