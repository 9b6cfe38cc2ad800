"""The first page a newcomer opens: ``GET /`` leads to the dashboard (not a 404), and ``/docs`` (Swagger UI) renders
in chromium with every request outside the service refused, from the vendored copy (app/meta/docs.py)."""

from __future__ import annotations

from urllib.parse import urlparse


def test_the_front_door_leads_to_the_dashboard(pg_env, api_factory) -> None:  # noqa: ANN001
    answer = api_factory().get("/", follow_redirects=False)
    assert answer.status_code == 307 and answer.headers["location"] == "/ui/", answer.text
    assert api_factory().get("/", follow_redirects=True).status_code == 200


def test_the_api_docs_render_offline(live_api, browser) -> None:  # noqa: ANN001
    api = live_api()
    own = urlparse(api.url).netloc
    outside: list[str] = []

    def only_the_service(route) -> None:  # noqa: ANN001
        if urlparse(route.request.url).netloc == own:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context = browser.new_context(base_url=api.url)
    context.route("**/*", only_the_service)
    page = context.new_page()
    assert page.goto("/docs").status == 200
    page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
    assert "memaudit" in page.inner_text(".swagger-ui .info .title")
    page.wait_for_selector(".opblock", timeout=30_000)
    assert page.locator(".opblock").count() > 20, "the operations are listed"
    assert not outside, f"the docs asked for something outside the service: {outside}"
    assert page.goto("/").url.rstrip("/").endswith("/ui") or "/ui/" in page.url
    context.close()
