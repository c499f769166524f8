"""The monitor web app (Starlette): one view per page, routes in one table, one JSON error shape.

Errors from ``/api/...`` are always ``{"error": {"status": 404, "code": "not_found", "message": "..."}}``.
Who may ask is decided in one place, ``AuthMiddleware``:

- Once the store has had an API key (active or revoked), or with ``--require-key``, every page and API call
  needs a valid key, from an ``Authorization: Bearer lgt_...`` header or from the session the login form
  opens; each user then sees only their own runs, and documents sent with a key belong to its user. A
  missing or wrong key gets 401 and learns nothing about anyone's runs. Revoking the last key does not
  make the server public.
- Without keys, a server on a non-loopback address serves nothing but ``/api/health`` (403) unless it was
  started with ``--allow-public-without-keys``; this is checked at every request.
- Without keys on a loopback address, everyone on this machine sees every run, so the browser is the only
  gate: the ``Host`` header must name a loopback address (``localhost``, ``127.0.0.1``, ``[::1]``, any
  port; DNS rebinding) and a POST's ``Origin``, when sent, must be the server's own origin; else 403.

Sessions are server-side: the ``logetl_session`` cookie holds a random id (HttpOnly, SameSite=Lax, Secure
under https), the store keeps its SHA-256 and the user, logout deletes it, and revoking its key ends it.
The login and logout forms carry a CSRF token that must match the ``logetl_csrf`` cookie (SameSite=Strict),
and their ``Origin``, when sent, must be the server's own.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import hmac
import json
import os
import re
import secrets
import time
from urllib.parse import parse_qs, urlsplit

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from logetl import __version__
from logetl.errors import LogetlError
from logetl.io.net import is_loopback
from logetl.monitor import alerts as alerting
from logetl.monitor import lineage, retention
from logetl.monitor import compare
from logetl.monitor.documents import MAX_DEPTH, STATUSES, DocumentError, depth
from logetl.monitor.store import SESSION_DAYS, SORTABLE, Store
from logetl.monitor.outbound import WebhookPolicy
from logetl.monitor.worker import Worker, delivery_log

HERE = os.path.dirname(os.path.abspath(__file__))
templates = Jinja2Templates(directory=os.path.join(HERE, "templates"))
MAX_DOCUMENT = 4 << 20
MAX_FORM = 16 << 10
PUBLIC = ("/login", "/static/", "/api/health")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
SESSION_COOKIE = "logetl_session"
CSRF_COOKIE = "logetl_csrf"
TOKEN = re.compile(r"[A-Za-z0-9_-]{32,64}")


class ApiError(LogetlError):
    """An answer of the monitor's HTTP API that is an error: its HTTP ``status``, a ``code`` (``CODES``) and
    the message, sent as one JSON shape (``error_body``)."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code = status, code


def error_body(status: int, code: str, message: str) -> dict:
    return {"error": {"status": status, "code": code, "message": message}}


CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
         413: "too_large", 415: "unsupported_media_type", 422: "invalid_document", 500: "internal_error"}


def _is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def _https(request: Request) -> bool:
    return request.url.scheme == "https"


def template(request: Request, name: str, context: dict, status_code: int = 200) -> Response:
    """An HTML page; it carries the CSRF token of its forms (and sets the cookie it must match)."""
    token = request.cookies.get(CSRF_COOKIE, "")
    fresh = not TOKEN.fullmatch(token)
    if fresh:
        token = secrets.token_urlsafe(32)
    response = templates.TemplateResponse(request, name, {"version": __version__, "user": None, "auth": False,
                                                          **context, "csrf": token}, status_code=status_code)
    if fresh:
        response.set_cookie(CSRF_COOKIE, token, path="/", httponly=True, samesite="strict", secure=_https(request))
    return response


def render_error(request: Request, status: int, code: str, message: str) -> Response:
    headers = {"Connection": "close"} if status == 413 else None   # the rest of the body is not read
    if _is_api(request):
        return JSONResponse(error_body(status, code, message), status_code=status, headers=headers)
    if status == 401:
        return template(request, "login.html", {"error": None}, status_code=401)
    response = template(request, "error.html", {"status": status, "message": message}, status_code=status)
    response.headers.update(headers or {})
    return response


# --- who may ask: the one place keys, sessions, Host and Origin are checked ----------------------------------

def _split_host(value: str) -> tuple[str, int | None]:
    """``name:port`` or ``[v6]:port`` -> (name, port); a bad port gives (name, -1)."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        name, _, port = value.partition(":") if value.count(":") == 1 else (value, "", "")
    if not port:
        return name, None
    return (name, int(port)) if port.isdigit() else (name, -1)


DEFAULT_PORTS = {"http": 80, "https": 443}


def same_origin(request: Request) -> bool:
    """No ``Origin`` header, or the server's own origin (scheme, Host name and port)."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    try:
        o = urlsplit(origin)
        theirs = (o.scheme, (o.hostname or "").lower(), o.port or DEFAULT_PORTS.get(o.scheme))
    except ValueError:
        return False
    name, port = _split_host(request.headers.get("host", ""))
    scheme = request.url.scheme
    return theirs == (scheme, name, port or DEFAULT_PORTS.get(scheme))


class AuthMiddleware:
    """Sets ``request.state.user``: None when the server has no keys (everyone sees everything),
    else the key's user. Answers 401 itself when a key is needed and missing or wrong, and 403 to a keyless
    server's forbidden requests (public address; foreign Host or Origin on loopback)."""

    def __init__(self, app, store: Store, require_key: bool, host: str = "127.0.0.1",
                 allow_public_without_keys: bool = False):
        self.app, self.store, self.require_key = app, store, require_key
        self.loopback = is_loopback(host)
        self.host = host
        self.allow_public = allow_public_without_keys

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope, receive)
        scope.setdefault("state", {})
        needed = self.require_key or self.store.keys_required()
        user = None
        refusal = None if needed else self.keyless_refusal(request)
        if refusal is not None:
            response = render_error(request, 403, "forbidden", refusal)
            return await response(scope, receive, send)
        if needed and not request.url.path.startswith(PUBLIC):
            user = self.identify(request)
            if user is None:
                response = render_error(request, 401, "unauthorized", "a valid API key is needed")
                return await response(scope, receive, send)
        scope["state"]["user"] = user
        scope["state"]["auth"] = needed
        return await self.app(scope, receive, send)

    def keyless_refusal(self, request: Request) -> str | None:
        """Why a server without keys refuses this request, or None."""
        if not self.loopback:
            if self.allow_public or request.url.path == "/api/health":
                return None
            return (f"this monitor listens on {self.host} and has no API key: it serves nobody until one exists "
                    "(logetl monitor keys create --user NAME)")
        name, _ = _split_host(request.headers.get("host", ""))
        if not is_loopback(name):
            return (f"Host {request.headers.get('host', '')!r} is not a loopback address: this monitor answers "
                    "only localhost, 127.0.0.1 and [::1]")
        if request.method not in SAFE_METHODS and not same_origin(request):
            return f"cross-origin request refused (Origin {request.headers.get('origin')!r})"
        return None

    def identify(self, request: Request) -> str | None:
        header = request.headers.get("authorization", "")
        if header:
            scheme, _, key = header.partition(" ")
            return self.store.user_of_key(key.strip()) if scheme.lower() in ("bearer", "apikey") else None
        return self.store.user_of_session(request.cookies.get(SESSION_COOKIE))


# --- parameters ----------------------------------------------------------------------------------------------

DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _time_param(request: Request, name: str) -> float | None:
    value = request.query_params.get(name)
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        if seconds != seconds or abs(seconds) == float("inf"):
            raise ApiError(400, "bad_request", f"{name} must be a date (YYYY-MM-DD), an ISO time or epoch seconds, "
                                               f"not {value!r}")
        return seconds
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ApiError(400, "bad_request", f"{name} must be a date (YYYY-MM-DD), an ISO time or epoch seconds, "
                                           f"not {value!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return parsed.timestamp()


def _int_param(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    value = request.query_params.get(name)
    if value is None or value == "":
        return default
    try:
        n = int(value)
    except ValueError:
        raise ApiError(400, "bad_request", f"{name} must be a whole number, not {value!r}") from None
    if not lo <= n <= hi:
        raise ApiError(400, "bad_request", f"{name} must be between {lo} and {hi}")
    return n


#: what ``GET /api/runs`` takes; anything else is refused (400), so a misspelt filter (``staus``) never
#: silently lists every run
RUN_PARAMS = ("status", "application", "since", "until", "tag", "sort", "order", "page", "per_page",
              "min_malformed_share", "max_malformed_share")


def _run_query(request: Request) -> dict:
    q = request.query_params
    unknown = sorted(set(q) - set(RUN_PARAMS))
    if unknown:
        raise ApiError(400, "bad_request", f"unknown parameter {unknown[0]!r}: /api/runs takes "
                                           f"{', '.join(RUN_PARAMS)}")
    tag = q.get("tag", "").strip() or None
    if tag is not None and len(tag) > 1000:
        raise ApiError(400, "bad_request", "tag may have at most 1000 characters")
    status = [s for v in q.getlist("status") for s in v.split(",") if s]
    bad = [s for s in status if s not in STATUSES]
    if bad:
        raise ApiError(400, "bad_request", f"status must be among {', '.join(STATUSES)}, not {bad[0]!r}")
    sort = q.get("sort", "started_at")
    if sort not in SORTABLE:
        raise ApiError(400, "bad_request", f"sort must be one of {', '.join(SORTABLE)}, not {sort!r}")
    order = q.get("order", "desc")
    if order not in ("asc", "desc"):
        raise ApiError(400, "bad_request", f"order must be asc or desc, not {order!r}")
    until = _time_param(request, "until")
    if until is not None and DATE.fullmatch(q.get("until", "")):   # a date is a whole day: up to its end
        until += 86400
    return {"status": status or None, "application": q.get("application") or None, "tag": tag,
            "since": _time_param(request, "since"), "until": until, "sort": sort, "descending": order == "desc",
            "min_malformed_share": _share_param(request, "min_malformed_share"),
            "max_malformed_share": _share_param(request, "max_malformed_share")}


def _share_param(request: Request, name: str) -> float | None:
    """A share of the lines read: a number from 0 to 1 (0.05 is 5 %)."""
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    try:
        share = float(value)
    except ValueError:
        share = float("nan")
    if not 0.0 <= share <= 1.0:   # NaN too
        raise ApiError(400, "bad_request", f"{name} must be a number from 0 to 1 (0.05 is 5 %), not {value!r}")
    return share


# --- API ------------------------------------------------------------------------------------------------------

async def read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 past ``limit`` bytes: at once by its Content-Length, else (chunked) as
    soon as it grows past the limit; the rest is never read (and the connection is closed)."""
    length = request.headers.get("content-length")
    if length is not None:
        if not length.strip().isdigit():
            raise ApiError(400, "bad_request", "Content-Length must be a whole number")
        if int(length) > limit:
            raise ApiError(413, "too_large", f"the body may have at most {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(413, "too_large", f"the body may have at most {limit} bytes")
    return bytes(body)


def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON")


async def post_documents(request: Request) -> Response:
    store: Store = request.app.state.store
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise ApiError(415, "unsupported_media_type", "send documents as application/json")
    body = await read_body(request, MAX_DOCUMENT)
    try:
        doc = json.loads(body, parse_constant=_no_constants)
    except RecursionError:
        raise ApiError(400, "bad_request", f"the body nests more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:
        raise ApiError(400, "bad_request", f"the body is not JSON: {exc}") from None
    if depth(doc) > MAX_DEPTH:
        raise ApiError(400, "bad_request", f"the body nests more than {MAX_DEPTH} levels deep")
    try:
        stored = store.ingest(doc, owner=request.state.user)
    except DocumentError as exc:
        raise ApiError(422, "invalid_document", str(exc)) from None
    return JSONResponse({"run_id": doc["run"]["run_id"], "seq": doc["seq"], "stored": stored}, status_code=202)


async def api_runs(request: Request) -> Response:
    store: Store = request.app.state.store
    query = _run_query(request)
    per_page = _int_param(request, "per_page", 50, 1, 500)
    page = _int_param(request, "page", 1, 1, 10_000_000)
    rows, total = store.list_runs(owner=request.state.user, limit=per_page, offset=(page - 1) * per_page, **query)
    return JSONResponse({"runs": rows, "total": total, "page": page, "per_page": per_page,
                         "pages": max(1, -(-total // per_page))})


async def api_run(request: Request) -> Response:
    store: Store = request.app.state.store
    run_id = request.path_params["run_id"].upper()
    run = store.get_run(run_id, owner=request.state.user)
    if run is None:
        raise ApiError(404, "not_found", f"no run {run_id}")
    return JSONResponse({"run": run, "previous_successful": store.previous_run(run, owner=request.state.user)})


def _two_runs(request: Request, error) -> tuple[dict, dict]:
    """The runs ``a`` and ``b`` of a comparison's path; ``error(message)`` for one that is not there."""
    store: Store = request.app.state.store
    found = []
    for key in ("a", "b"):
        run_id = request.path_params[key].upper()
        run = store.get_run(run_id, owner=request.state.user)
        if run is None:
            raise error(f"no run {run_id}")
        found.append(run)
    return found[0], found[1]


async def api_compare(request: Request) -> Response:
    a, b = _two_runs(request, lambda m: ApiError(404, "not_found", m))
    return JSONResponse(compare.compare(a, b))


async def compare_page(request: Request) -> Response:
    a, b = _two_runs(request, lambda m: HTTPException(404, m))
    return _page(request, "compare.html", a=a, b=b, result=compare.compare(a, b), show=compare.show,
                 delta=compare.delta)


async def api_applications(request: Request) -> Response:
    return JSONResponse({"applications": request.app.state.store.applications(owner=request.state.user)})


async def api_health(request: Request) -> Response:
    return JSONResponse({"status": "ok", "version": __version__})


# --- pages ----------------------------------------------------------------------------------------------------

def _page(request: Request, name: str, **context) -> Response:
    return template(request, name, {"user": request.state.user, "auth": request.state.auth, **context})


async def runs_page(request: Request) -> Response:
    return _page(request, "runs.html", statuses=STATUSES, sortable=SORTABLE)


async def run_page(request: Request) -> Response:
    run_id = request.path_params["run_id"].upper()
    run = request.app.state.store.get_run(run_id, owner=request.state.user)
    if run is None:
        raise HTTPException(404, f"no run {run_id}")
    return _page(request, "run.html", run_id=run_id, application=run["application"])


FORM_REFUSED = "This form came from another site or has expired: reload the page and try again."


async def _form(request: Request) -> dict[str, str]:
    """A posted login/logout form, after its CSRF checks: its token must match the ``logetl_csrf`` cookie,
    and an Origin header, when sent, must be the server's own."""
    body = await read_body(request, MAX_FORM)
    form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if not (same_origin(request) and TOKEN.fullmatch(cookie)
            and hmac.compare_digest(form.get("csrf", "").encode(), cookie.encode())):
        raise HTTPException(403, FORM_REFUSED)
    return form


async def login(request: Request) -> Response:
    store: Store = request.app.state.store
    if request.method == "POST":
        form = await _form(request)
        sid = store.open_session(form.get("key", "").strip())
        if sid is None:
            return template(request, "login.html", {"error": "That key is not valid."}, status_code=401)
        store.close_session(request.cookies.get(SESSION_COOKIE))   # a new id at every login
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(SESSION_COOKIE, sid, max_age=SESSION_DAYS * 86400, path="/", httponly=True,
                            samesite="lax", secure=_https(request))
        return response
    return template(request, "login.html", {"error": None})


async def logout(request: Request) -> Response:
    await _form(request)
    request.app.state.store.close_session(request.cookies.get(SESSION_COOKIE))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax", secure=_https(request))
    return response


# --- alerts, lineage search, trends ------------------------------------------------------------------------

async def _json_body(request: Request) -> dict:
    """A small JSON object body (``application/json`` only: a cross-site form cannot send it)."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise ApiError(415, "unsupported_media_type", "send application/json")
    body = await read_body(request, MAX_FORM)
    try:
        value = json.loads(body, parse_constant=_no_constants)
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, "bad_request", f"the body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ApiError(400, "bad_request", "the body must be a JSON object")
    return value


async def api_alert_rules(request: Request) -> Response:
    store: Store = request.app.state.store
    if request.method == "GET":
        return JSONResponse({"rules": alerting.list_rules(store, owner=request.state.user)})
    body = await _json_body(request)
    unknown = sorted(set(body) - {"application", "when", "threshold", "last", "tag", "webhook"})
    if unknown:
        raise ApiError(400, "bad_request", f"unknown field {unknown[0]!r}")
    try:
        rule = alerting.add_rule(store, owner=request.state.user, application=body.get("application"),
                                 kind=body.get("when"), threshold=body.get("threshold"), last=body.get("last"),
                                 tag=body.get("tag"), webhook=body.get("webhook"),
                                 policy=request.app.state.worker.webhooks)
    except alerting.RuleError as exc:
        raise ApiError(422, "invalid_rule", str(exc)) from None

    request.app.state.worker.active = True
    return JSONResponse({"rule": rule}, status_code=201)


async def api_alert_rule(request: Request) -> Response:
    raw = request.path_params["rule_id"]
    rule_id = alerting.rule_id_of(raw)
    if rule_id is None or not alerting.remove_rule(request.app.state.store, rule_id, owner=request.state.user):
        raise ApiError(404, "not_found", f"no alert rule {raw}")
    return JSONResponse({"removed": rule_id})


async def api_alerts(request: Request) -> Response:
    ids = [x.strip().upper() for x in request.query_params.get("run_id", "").split(",") if x.strip()]
    limit = _int_param(request, "limit", 200, 1, 1000)
    return JSONResponse({"alerts": alerting.list_alerts(request.app.state.store, owner=request.state.user,
                                                        run_ids=ids or None, limit=limit,
                                                        application=request.query_params.get("application"))})


async def api_deliveries(request: Request) -> Response:
    kind = request.query_params.get("kind") or None
    if kind not in (None, "webhook", "openlineage"):
        raise ApiError(400, "bad_request", f"kind must be webhook or openlineage, not {kind!r}")
    run_id = (request.query_params.get("run_id") or "").upper() or None
    return JSONResponse({"deliveries": delivery_log(request.app.state.store, owner=request.state.user,
                                                    run_id=run_id, kind=kind)})


SEARCH_FIELDS = ("q", "input", "output", "tag", "error")


def _search_query(request: Request) -> dict:
    terms = {k: request.query_params.get(k, "").strip() or None for k in SEARCH_FIELDS}
    for k, v in terms.items():
        if v is not None and len(v) > 1000:
            raise ApiError(400, "bad_request", f"{k} may have at most 1000 characters")
    return terms


async def api_search(request: Request) -> Response:
    terms = _search_query(request)
    if not any(terms.values()):
        raise ApiError(400, "bad_request", "give at least one of q, input, output, tag, error")
    limit = _int_param(request, "limit", 100, 1, 1000)
    rows, total = lineage.search(request.app.state.store, owner=request.state.user, limit=limit, **terms)
    return JSONResponse({"runs": rows, "total": total})


async def api_trend(request: Request) -> Response:
    application = request.query_params.get("application", "")
    if not application:
        raise ApiError(400, "bad_request", "application is needed")
    days = _int_param(request, "days", 0, 0, 100_000) or None
    return JSONResponse({"application": application,
                         "days": retention.trend(request.app.state.store, application, owner=request.state.user,
                                                 days=days)})


async def alerts_page(request: Request) -> Response:
    return _page(request, "alerts.html")


async def search_page(request: Request) -> Response:
    return _page(request, "search.html", q=request.query_params.get("q", ""))


async def trend_page(request: Request) -> Response:
    return _page(request, "trend.html", application=request.query_params.get("application", ""))


ROUTES = [
    Route("/", runs_page, name="runs"),
    Route("/alerts", alerts_page, name="alerts"),
    Route("/search", search_page, name="search"),
    Route("/trend", trend_page, name="trend"),
    Route("/api/alert-rules", api_alert_rules, methods=["GET", "POST"], name="api_alert_rules"),
    Route("/api/alert-rules/{rule_id:str}", api_alert_rule, methods=["DELETE"], name="api_alert_rule"),
    Route("/api/alerts", api_alerts, name="api_alerts"),
    Route("/api/deliveries", api_deliveries, name="api_deliveries"),
    Route("/api/search", api_search, name="api_search"),
    Route("/api/trend", api_trend, name="api_trend"),
    Route("/runs/{run_id:str}", run_page, name="run"),
    Route("/runs/{a:str}/compare/{b:str}", compare_page, name="compare"),
    Route("/login", login, methods=["GET", "POST"], name="login"),
    Route("/logout", logout, methods=["POST"], name="logout"),
    Route("/api/health", api_health, name="api_health"),
    Route("/api/documents", post_documents, methods=["POST"], name="api_documents"),
    Route("/api/runs", api_runs, name="api_runs"),
    Route("/api/runs/{run_id:str}", api_run, name="api_run"),
    Route("/api/runs/{a:str}/compare/{b:str}", api_compare, name="api_compare"),
    Route("/api/applications", api_applications, name="api_applications"),
    Mount("/static", StaticFiles(directory=os.path.join(HERE, "static")), name="static"),
]


async def _api_error(request: Request, exc: ApiError) -> Response:
    return render_error(request, exc.status, exc.code, exc.message)


async def _http_error(request: Request, exc: HTTPException) -> Response:
    return render_error(request, exc.status_code, CODES.get(exc.status_code, "error"), str(exc.detail))


async def _server_error(request: Request, exc: Exception) -> Response:
    return render_error(request, 500, "internal_error", "the monitor failed to answer this request")


def create_app(store: Store, require_key: bool = False, host: str = "127.0.0.1",
               allow_public_without_keys: bool = False, *, public_url: str | None = None,
               openlineage_url: str | None = None, openlineage_namespace: str = "logetl",
               delivery_backoff: float = 2.0, delivery_attempts: int = 5, webhook_allow=()) -> Starlette:
    """The app over ``store``; ``host`` is the address the server listens on (loopback or not decides which
    checks a server without keys makes, see ``AuthMiddleware``). While it runs (its lifespan), a background
    worker evaluates alert rules, makes OpenLineage events and delivers both (``worker.py``); ``public_url``
    is the address alert payloads link runs at; ``webhook_allow``: the local-network hosts and networks
    that webhooks may reach (``outbound.WebhookPolicy``)."""
    webhooks = WebhookPolicy(webhook_allow)
    worker = Worker(store, public_url=public_url or "http://127.0.0.1:8080", openlineage_url=openlineage_url,
                    openlineage_namespace=openlineage_namespace, backoff=delivery_backoff,
                    max_attempts=delivery_attempts, webhooks=webhooks)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        worker.start()
        store.on_ingest = worker.notify
        try:
            yield
        finally:
            store.on_ingest = None
            worker.stop()

    app = Starlette(
        lifespan=lifespan,
        routes=ROUTES,
        middleware=[Middleware(AuthMiddleware, store=store, require_key=require_key, host=host,
                               allow_public_without_keys=allow_public_without_keys)],
        exception_handlers={ApiError: _api_error, HTTPException: _http_error, Exception: _server_error},
    )
    # no redirect to the path with or without a trailing slash: the API answers every request itself, in its
    # error shape (``DELETE /api/alert-rules/..%2f`` was a 307 with no body), and the pages never link to one
    app.router.redirect_slashes = False
    app.state.store = store
    app.state.worker = worker
    app.state.started = time.time()
    return app
