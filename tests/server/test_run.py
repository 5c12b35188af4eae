"""The served run (``pointcast.server.run``): swapping ``current`` serves the new run; answers kept per run
and query text, within their bound; point files cached within theirs; only the index's ids name files."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime

from pointcast.server import app as server_app, create_app
from pointcast.server.grammar import parse_query
from served import (
    BERLIN,
    MEDIUM,
    PARIS,
    ROME,
    SHORT,
    SS1WX,
    TOKYO,
    assert_error,
    call_app,
    get,
    live_server,
    point_current,
    publish_run,
)


def test_swapping_current_serves_the_new_run(tmp_path):
    root = tmp_path / "out"
    root.mkdir()
    query = f"latlon={PARIS}&freq=1H"
    with live_server(root) as (client, app, _):
        # nothing published yet
        assert_error(get(client, MEDIUM, query), 404, "404_002", "no forecast run published yet")
        assert_error(client.get("/catalog"), 404, "404_002", "no forecast run published yet")

        publish_run(root, "run-a", datetime(2026, 11, 22, 0, tzinfo=UTC), temp=10.0)
        point_current(root, "run-a")
        a = get(client, MEDIUM, query)
        assert a.status_code == 200
        assert a.json()[PARIS]["basetime"] == "2026-11-22T00:00:00+00:00"
        assert app._run.run_id == "run-a" and app._run.cached_files == 2  # the file and its deflate form

        # the next run is written completely, then current is swapped
        publish_run(root, "run-b", datetime(2026, 11, 22, 3, tzinfo=UTC), temp=20.0)
        assert get(client, MEDIUM, query).headers["etag"] == a.headers["etag"]
        point_current(root, "run-b")
        b = get(client, MEDIUM, query)
        assert b.status_code == 200
        assert b.json()[PARIS]["basetime"] == "2026-11-22T03:00:00+00:00"
        assert b.json()[PARIS]["data"][0]["temp_2m"] == 20.0
        assert b.headers["etag"] != a.headers["etag"]
        assert b.headers["last-modified"] != a.headers["last-modified"]
        assert get(client, MEDIUM, query, headers={"If-None-Match": a.headers["etag"]}).status_code == 200
        assert client.get("/catalog").json()["run_id"] == "run-b"
        assert app._run.run_id == "run-b"  # run-a's caches are gone

        # a retired run that is deleted does not matter any more
        point_current(root, "run-a")
        assert get(client, MEDIUM, query).json()[PARIS]["data"][0]["temp_2m"] == 10.0


def test_a_repeated_query_is_answered_from_its_runs_kept_answer(tmp_path, monkeypatch):
    """The operation runs once per run and query text; the request's own headers (gzip,
    If-None-Match, max-age) and ss1wx's requestId are still applied to every answer."""
    root = tmp_path / "out"
    publish_run(root, "a", datetime(2026, 11, 22, 0, tzinfo=UTC), temp=10.0)
    publish_run(root, "b", datetime(2026, 11, 22, 3, tzinfo=UTC), temp=20.0)
    parsed = []
    monkeypatch.setattr(server_app, "parse_query",
                        lambda query, known=(): parsed.append(query) or parse_query(query, known))
    now = [1_795_000_000.0]
    app = create_app(root, clock=lambda: now[0])
    query = f"latlon={PARIS}&freq=1H".encode()
    point_current(root, "a")
    first = call_app(app, "GET", MEDIUM, query)
    now[0] += 7
    second = call_app(app, "GET", MEDIUM, query)
    assert parsed == [query] and first[0] == second[0] == 200 and first[2] == second[2]
    assert first[1][b"etag"] == second[1][b"etag"]
    age = [int(r[1][b"cache-control"].rsplit(b"=", 1)[1]) for r in (first, second)]
    assert age[0] - age[1] == 7  # max-age is the request's, not the kept answer's
    assert call_app(app, "GET", MEDIUM, query, [(b"if-none-match", first[1][b"etag"])])[0] == 304
    gz = call_app(app, "GET", MEDIUM, query, [(b"accept-encoding", b"gzip")])
    assert gz[1][b"content-encoding"] == b"gzip" and gzip.decompress(gz[2]) == first[2]
    assert call_app(app, "HEAD", MEDIUM, query)[2] == b""
    assert parsed == [query]

    other = f"latlon={PARIS}&freq=1H&".encode()  # another text, the same request: answered anew
    assert call_app(app, "GET", MEDIUM, other)[2] == first[2] and parsed == [query, other]

    point_current(root, "b")  # a new run: its own answers
    b = call_app(app, "GET", MEDIUM, query)
    assert json.loads(b[2])[PARIS]["data"][0]["temp_2m"] == 20.0 and parsed[-1] == query and len(parsed) == 3

    japan = f"lat={TOKYO[0]}&lon={TOKYO[1]}".encode()
    ids = {json.loads(call_app(app, "GET", SS1WX, japan)[2])["requestId"] for _ in range(5)}
    assert len(ids) == 5 and parsed.count(japan) == 1  # a kept answer, a fresh id each time


def test_an_answer_asked_for_again_is_sent_from_its_body_file(tmp_path, monkeypatch):
    """Under a server offering ASGI's zero-copy send, the second request for a query text is
    answered from the answer's body in an in-memory file (``sendfile``): the same status,
    headers and bytes as the app gives any ASGI server, in identity and in gzip, for GET, HEAD
    and a conditional request, and no more such files than ``MAX_BODY_FILES``."""
    from pointcast.server import responses, run as server_run

    monkeypatch.setattr(server_run, "MAX_BODY_FILES", 2)
    monkeypatch.setattr(responses, "ZERO_COPY_BYTES", 256)  # the fixture's answers are small
    root = tmp_path / "out"
    publish_run(root, "a", datetime(2026, 11, 22, 0, tzinfo=UTC))
    point_current(root, "a")
    queries = [f"latlon={PARIS}&freq=15min{'&' * k}" for k in range(3)]
    plain = create_app(root)  # called without the extension: joined bytes every time
    with live_server(root) as (client, app, _):
        for query in queries:
            for encoding in ("identity", "gzip"):
                asked = {"accept-encoding": encoding}
                status, expected, body = call_app(plain, "GET", MEDIUM, query.encode(), [(b"accept-encoding", encoding.encode())])
                assert len(body) >= responses.ZERO_COPY_BYTES
                expected = {k.decode(): v.decode() for k, v in expected.items() if k != b"cache-control"}
                for _ in range(3):
                    with client.stream("GET", f"{MEDIUM}?{query}", headers=asked) as r:
                        got = {k: v for k, v in r.headers.items() if k not in ("date", "cache-control")}
                        assert (r.status_code, got, b"".join(r.iter_raw())) == (status, expected, body)
                head = client.head(f"{MEDIUM}?{query}", headers=asked)
                assert head.headers["content-length"] == expected["content-length"] and head.content == b""
                conditional = {**asked, "if-none-match": expected["etag"]}
                assert client.get(f"{MEDIUM}?{query}", headers=conditional).status_code == 304
        files = app._run.body_files
        assert len(files.entries) == 2 and files.size == sum(f.size for f, _ in files.entries.values())
        assert all(f.size >= 256 and not f.file.closed for f, _ in files.entries.values())


def test_kept_answers_stay_within_their_own_bound(tmp_path, monkeypatch):
    """Answers are charged with every byte they hold, within a bound of their own: new query
    texts evict the oldest answers, never the files."""
    root = tmp_path / "out"
    publish_run(root, "a", datetime(2026, 11, 22, 0, tzinfo=UTC))
    point_current(root, "a")
    parsed = []
    monkeypatch.setattr(server_app, "parse_query",
                        lambda query, known=(): parsed.append(query) or parse_query(query, known))
    one = call_app(create_app(root), "GET", MEDIUM, f"latlon={PARIS}&freq=1H".encode())
    bound = 2 * len(one[2])  # room for one answer, not for two
    app = create_app(root, max_answer_bytes=bound)
    queries = [f"latlon={PARIS}&freq=1H{'&' * k}".encode() for k in range(3)]
    for query in queries * 2:
        assert call_app(app, "GET", MEDIUM, query)[2] == one[2]
        assert app._run.answers.size <= bound and len(app._run.answers.entries) == 1
    assert len(parsed) == 7  # the one above, then every request: each answer evicted before it came again
    assert app._run.cached_files == 1  # the point file stayed
    [(_, size)] = app._run.answers.entries.values()
    assert size >= len(one[2])


def test_error_answers_are_not_kept(tmp_path, monkeypatch):
    root = tmp_path / "out"
    publish_run(root, "a", datetime(2026, 11, 22, 0, tzinfo=UTC))
    point_current(root, "a")
    app = create_app(root)
    for _ in range(2):
        assert call_app(app, "GET", MEDIUM, b"latlon=48.8566,2.3522&freq=2H")[0] == 400
        assert call_app(app, "GET", MEDIUM, b"latlon=0,0&freq=1H")[0] == 403  # outside the coverage
    assert not app._run.answers.entries


def test_missing_product_or_point_file_is_404_002(tmp_path):
    root = tmp_path / "out"
    run = publish_run(root, "r", datetime(2026, 11, 22, tzinfo=UTC))
    point_current(root, "r")
    (run / "json" / "eu-short" / "index.json").unlink()
    (run / "json" / "eu-medium" / "15min" / "rome.json").unlink()
    app = create_app(root)
    status, _, body = call_app(app, "GET", SHORT, f"latlon={PARIS}&freq=1H".encode())
    assert status == 404 and json.loads(body)["code"] == "404_002"
    status, _, body = call_app(app, "GET", MEDIUM, f"latlon={ROME}&freq=15min".encode())
    assert status == 404 and json.loads(body)["code"] == "404_002"
    assert call_app(app, "GET", MEDIUM, f"latlon={ROME}&freq=30min".encode())[0] == 200


def test_point_cache_is_bounded(tmp_path):
    root = tmp_path / "out"
    run = publish_run(root, "r", datetime(2026, 11, 22, tzinfo=UTC))
    point_current(root, "r")
    size = (run / "json" / "eu-medium" / "1H" / "paris.json").stat().st_size
    app = create_app(root, max_cache_bytes=int(size * 2.5))
    for latlon in (PARIS, BERLIN, ROME, PARIS):
        assert call_app(app, "GET", MEDIUM, f"latlon={latlon}&freq=1H".encode())[0] == 200
    assert app._run.cached_files == 2


def test_index_ids_are_the_only_source_of_paths(tmp_path):
    root = tmp_path / "out"
    run = publish_run(root, "r", datetime(2026, 11, 22, tzinfo=UTC))
    point_current(root, "r")
    index_path = run / "json" / "eu-medium" / "index.json"
    index = json.loads(index_path.read_text())
    index["points"][0]["id"] = "../../../../etc/passwd"  # a broken index cannot reach outside
    index_path.write_text(json.dumps(index))
    status, _, body = call_app(create_app(root), "GET", MEDIUM, f"latlon={PARIS}&freq=1H".encode())
    assert status == 404 and json.loads(body)["code"] == "404_002"


def test_only_product_folders_are_products(tmp_path, caplog):
    """A run's json/ also holds the verification's folder (its own index.json, no points) and
    the viewer's: neither is a product, and serving the run logs no error for them."""
    root = tmp_path / "out"
    run = publish_run(root, "r", datetime(2026, 11, 22, tzinfo=UTC))
    (run / "json" / "verification").mkdir()
    (run / "json" / "verification" / "index.json").write_text(
        json.dumps({"generated": "2026-11-22T04:00:00+00:00", "products": ["eu-medium"]}))
    (run / "json" / "verification" / "eu-medium.json").write_text("{}")
    (run / "json" / "viewer").mkdir()
    point_current(root, "r")
    app = create_app(root)
    with caplog.at_level("INFO", logger="pointcast"):
        status, _, body = call_app(app, "GET", "/catalog", b"")
    assert status == 200
    served = [p["product"] for p in json.loads(body)["products"]]
    assert "verification" not in served and "viewer" not in served and "eu-medium" in served
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
