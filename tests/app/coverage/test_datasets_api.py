"""The datasets API on real Postgres: upload (streamed, size-limited), read, list, delete, bad input, and
the coverage audit's request validation."""

from __future__ import annotations

import json

import pytest

ITEMS = "1::Toy Story (1995)::Animation|Comedy\n2::Jumanji (1995)::Adventure\n3::Heat (1995)::Action\n"
USERS = "1::F::1::10::48067\n2::M::56::16::70072\n"
RATINGS = "1::1::5::978300760\n1::2::3::978302109\n2::1::4::978298413\n2::3::4::978299000\n"


def create_files(items: str | None = ITEMS, users: str | None = USERS, ratings: str | None = RATINGS) -> dict:
    files = {}
    for field, name, text in (
        ("items", "movies.dat", items),
        ("users", "users.dat", users),
        ("interactions", "ratings.dat", ratings),
    ):
        if text is not None:
            files[field] = (name, text.encode(), "application/octet-stream")
    return files


def upload(api, name: str = "ml-tiny", data: dict | None = None, **files_kw):
    return api.post("/datasets", data={"name": name, **(data or {})}, files=create_files(**files_kw))


@pytest.fixture
def auditor(pg_env, api_factory):
    return api_factory("auditor")


def detail_fields(response) -> list[str]:
    return [d["field"] for d in response.json()["detail"]]


def test_upload_stores_files_with_counts_and_popularity(auditor):
    r = upload(auditor)
    assert r.status_code == 201, r.text
    body = r.json()
    files = {f["target"]: f for f in body["files"]}
    assert {t: f["rows"] for t, f in files.items()} == {"items": 3, "users": 2, "interactions": 4}
    assert files["items"]["mapping"]["columns"] == ["MovieID", "Title", "Genres"]
    assert auditor.get(f"/datasets/{body['id']}").json() == body
    listed = auditor.get("/datasets").json()
    assert body["id"] in [d["id"] for d in listed["items"]]


def test_malformed_lines_are_reported_with_line_numbers(auditor):
    r = upload(auditor, items=ITEMS + "4::Sabrina (1995)\n5::A::B::C\n6::Tom and Huck (1995)::Adventure\n")
    assert r.status_code == 201, r.text
    items = next(f for f in r.json()["files"] if f["target"] == "items")
    assert items["rows"] == 4 and items["malformed"] == 2
    assert [p["line"] for p in items["problems"]] == [4, 5]


def test_csv_with_column_mapping(auditor):
    csv_items = 'movieId,title,genres\n1,"American President, The (1995)",Comedy\n2,Heat (1995),Action\n'
    mapping = {"items": {"columns": ["movieId", "title", "genres"], "roles": {"item_id": "movieId"}}}
    r = auditor.post(
        "/datasets",
        data={"name": "csv", "mapping": json.dumps(mapping)},
        files={"items": ("movies.csv", csv_items.encode(), "text/csv")},
    )
    assert r.status_code == 201, r.text
    assert r.json()["files"][0]["format"] == "csv" and r.json()["files"][0]["rows"] == 2


@pytest.mark.parametrize(
    ("kwargs", "field", "fragment"),
    [
        ({"items": "", "users": None, "ratings": None}, "files.items", "no valid records"),
        ({"ratings": RATINGS + "1::99::5::978300999\n"}, "files.interactions", "first lines: 5"),
        ({"data": {"mapping": '{"items": {"columns": ["Id"], "roles": {"item_id": "Nope"}}}'}}, "mapping.roles", ""),
        ({"data": {"mapping": '{"movies": {}}'}}, "mapping", ""),
        ({"data": {"mapping": "not json"}}, "mapping", ""),
        ({"data": {"items_format": "parquet"}}, "items_format", ""),
        ({"name": ""}, "name", ""),
        ({"items": None, "users": None, "ratings": None}, "body", "multipart"),
    ],
)
def test_bad_uploads_answer_422_naming_the_field(auditor, kwargs, field, fragment):
    r = upload(auditor, **kwargs)
    assert r.status_code == 422, r.text
    assert field in detail_fields(r), r.text
    assert fragment in r.text


def test_failed_upload_leaves_nothing_behind(auditor):
    before = auditor.get("/datasets").json()["total"]
    assert upload(auditor, ratings=RATINGS + "1::99::5::978300999\n").status_code == 422
    assert auditor.get("/datasets").json()["total"] == before


def test_unknown_file_extension_needs_a_declared_format(auditor):
    r = auditor.post("/datasets", data={"name": "x"}, files={"items": ("movies.txt", ITEMS.encode(), "text/plain")})
    assert r.status_code == 422 and "items_format" in detail_fields(r)
    r = auditor.post(
        "/datasets",
        data={"name": "x", "items_format": "movielens"},
        files={"items": ("movies.txt", ITEMS.encode(), "text/plain")},
    )
    assert r.status_code == 201, r.text


def test_upload_over_the_size_limit_is_413(pg_env, api_factory, monkeypatch):
    from app.settings import get_settings

    monkeypatch.setenv("MEMAUDIT_MAX_DATASET_UPLOAD_BYTES", "700")  # the whole request, multipart framing included
    get_settings.cache_clear()
    api = api_factory("auditor")
    r = upload(api, items=ITEMS * 10)
    assert r.status_code == 413, r.text
    assert "700 bytes" in r.text
    assert upload(api, users=None, ratings=None).status_code == 201, "a small upload still fits"


def test_upload_without_content_length_is_cut_at_the_limit(pg_env, api_factory, monkeypatch):
    from app.settings import get_settings

    monkeypatch.setenv("MEMAUDIT_MAX_DATASET_UPLOAD_BYTES", "5000")
    get_settings.cache_clear()
    boundary = "memauditboundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\nbig\r\n--{boundary}\r\n'
        'Content-Disposition: form-data; name="items"; filename="movies.dat"\r\n\r\n'
    ).encode()
    sent = []

    def chunks():  # a chunked upload announces no size: only counting the stream can stop it
        yield head
        for i in range(1, 10_000):
            sent.append(i)
            yield f"{i}::Film {i} (1999)::Drama\n".encode()
        yield f"\r\n--{boundary}--\r\n".encode()

    r = api_factory("auditor").post(
        "/datasets", content=chunks(), headers={"Content-Type": f"multipart/form-data; boundary={boundary}"}
    )
    assert r.status_code == 413, r.text


def test_visibility_and_roles(pg_env, api_factory, auditor):
    dataset_id = upload(auditor).json()["id"]
    other = api_factory("auditor")
    assert other.get(f"/datasets/{dataset_id}").status_code == 404
    assert other.delete(f"/datasets/{dataset_id}").status_code == 404
    assert api_factory("regulator").get(f"/datasets/{dataset_id}").status_code == 200
    assert api_factory("regulator").delete(f"/datasets/{dataset_id}").status_code == 403
    assert upload(api_factory("pipeline")).status_code == 403
    assert api_factory().get("/datasets").status_code == 401


def test_delete_removes_the_dataset(auditor):
    dataset_id = upload(auditor).json()["id"]
    r = auditor.delete(f"/datasets/{dataset_id}")
    assert r.status_code == 200 and r.json()["records_deleted"] == 9
    assert auditor.get(f"/datasets/{dataset_id}").status_code == 404


def coverage_body(dataset_id: str, target: str = "items", **options) -> dict:
    return {
        "kind": "coverage",
        "model": "groundtruth-tiny",
        "dataset_id": dataset_id,
        "target": target,
        "options": options,
    }


def test_coverage_audit_bad_requests_name_the_field(auditor):
    only_items = upload(auditor, users=None, ratings=None).json()["id"]
    cases = [
        (coverage_body("nope"), "dataset_id"),
        (coverage_body(only_items, "users"), "target"),
        (coverage_body(only_items, "ratings"), "target"),
        (coverage_body(only_items, k=3), "options.k"),
        (coverage_body(only_items, k=-1), "options.k"),
        ({**coverage_body(only_items), "model": "no-such-model"}, "model"),
    ]
    for payload, field in cases:
        r = auditor.post("/audits", json=payload)
        assert r.status_code == 422, (payload, r.text)
        assert any(f.endswith(field) or f == field for f in detail_fields(r)), (field, r.text)


def test_records_of_a_non_coverage_audit_is_404(auditor):
    r = auditor.get("/audits/0123456789abcdef0123456789abcdef/records")
    assert r.status_code == 404


def test_an_upload_is_committed_before_its_answer_is_sent(pg_env):
    """CI once saw a coverage audit refuse a dataset id that POST /datasets had just answered with: the request's
    session committed after the response was sent (FastAPI's default for a dependency with yield). The order of what
    happens, recorded on the real app: the commit, then the answer's first byte."""
    from fastapi.testclient import TestClient
    from sqlalchemy import event
    from sqlalchemy.orm import Session

    from app.main import create_app
    from tests.conftest import make_key

    order: list[str] = []
    app = create_app()

    async def recording(scope, receive, send):  # noqa: ANN001, ANN202
        async def watched(message):  # noqa: ANN001, ANN202
            if message["type"] == "http.response.start":
                order.append(f"answer {message['status']}")
            await send(message)

        await app(scope, receive, watched)

    def committed(session) -> None:  # noqa: ANN001
        order.append("commit")

    key = make_key("auditor")
    event.listen(Session, "after_commit", committed)
    try:
        with TestClient(recording) as client:
            order.clear()  # the key's check and the app's start commit too: what follows is the upload's
            r = client.post(
                "/datasets",
                data={"name": "ml-tiny"},
                files=create_files(),
                headers={"Authorization": f"Bearer {key}"},
            )
    finally:
        event.remove(Session, "after_commit", committed)
    assert r.status_code == 201, r.text
    assert "answer 201" in order and order.index("commit") < order.index("answer 201") and order[-1] == "answer 201", (
        order
    )
