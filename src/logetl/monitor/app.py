"""The monitor web app (Starlette): one view per page, routes in one table, one JSON error shape.

Errors from ``/api/...`` are always ``{"error": {"status": 404, "code": "not_found", "message": "..."}}``.
Who is asking is decided in one place, ``AuthMiddleware``: when the store has API keys (or the server
was started with ``--require-key``), every page and API call needs a valid key, from an
``Authorization: Bearer lgt_...`` header or from the session cookie the login form sets; each user then
sees only their own runs, and documents sent with a key belong to its user. A missing or wrong key gets
401 and learns nothing about anyone's runs. Without keys, everyone sees every run.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import time

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from logetl import __version__
from logetl.monitor.documents import STATUSES, DocumentError
from logetl.monitor.store import SORTABLE, Store

HERE = os.path.dirname(os.path.abspath(__file__))
templates = Jinja2Templates(directory=os.path.join(HERE, "templates"))
MAX_DOCUMENT = 4 << 20
PUBLIC = ("/login", "/static/", "/api/health")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_body(status: int, code: str, message: str) -> dict:
    return {"error": {"status": status, "code": code, "message": message}}


CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
         413: "too_large", 415: "unsupported_media_type", 422: "invalid_document", 500: "internal_error"}


def _is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def render_error(request: Request, status: int, code: str, message: str) -> Response:
    if _is_api(request):
        return JSONResponse(error_body(status, code, message), status_code=status)
    if status == 401:
        return templates.TemplateResponse(request, "login.html", {"error": None, "version": __version__},
                                          status_code=401)
    return templates.TemplateResponse(request, "error.html", {"status": status, "message": message,
                                                              "version": __version__}, status_code=status)


# --- who is asking: the one place keys are checked --------------------------------------------------------

class AuthMiddleware:
    """Sets ``request.state.user``: None when the server has no keys (everyone sees everything),
    else the key's user. Answers 401 itself when a key is needed and missing or wrong."""

    def __init__(self, app, store: Store, require_key: bool):
        self.app, self.store, self.require_key = app, store, require_key

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope, receive)
        scope.setdefault("state", {})
        needed = self.require_key or self.store.has_keys()
        user = None
        if needed and not request.url.path.startswith(PUBLIC):
            user = self.identify(request)
            if user is None:
                response = render_error(request, 401, "unauthorized", "a valid API key is needed")
                return await response(scope, receive, send)
        scope["state"]["user"] = user
        scope["state"]["auth"] = needed
        return await self.app(scope, receive, send)

    def identify(self, request: Request) -> str | None:
        header = request.headers.get("authorization", "")
        if header:
            scheme, _, key = header.partition(" ")
            return self.store.user_of_key(key.strip()) if scheme.lower() in ("bearer", "apikey") else None
        key = request.session.get("key") if "session" in request.scope else None
        return self.store.user_of_key(key)


# --- parameters ----------------------------------------------------------------------------------------------

def _time_param(request: Request, name: str) -> float | None:
    value = request.query_params.get(name)
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
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


def _run_query(request: Request) -> dict:
    q = request.query_params
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
    if until is not None and len(q.get("until", "")) == 10:   # a whole day: up to its end
        until += 86400
    return {"status": status or None, "application": q.get("application") or None,
            "since": _time_param(request, "since"), "until": until, "sort": sort, "descending": order == "desc"}


# --- API ------------------------------------------------------------------------------------------------------

async def post_documents(request: Request) -> Response:
    store: Store = request.app.state.store
    if "application/json" not in request.headers.get("content-type", ""):
        raise ApiError(415, "unsupported_media_type", "send documents as application/json")
    body = await request.body()
    if len(body) > MAX_DOCUMENT:
        raise ApiError(413, "too_large", f"a document may have at most {MAX_DOCUMENT} bytes")
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise ApiError(400, "bad_request", f"the body is not JSON: {exc}") from None
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
    return JSONResponse({"run": run})


async def api_applications(request: Request) -> Response:
    return JSONResponse({"applications": request.app.state.store.applications(owner=request.state.user)})


async def api_health(request: Request) -> Response:
    return JSONResponse({"status": "ok", "version": __version__})


# --- pages ----------------------------------------------------------------------------------------------------

def _page(request: Request, name: str, **context) -> Response:
    return templates.TemplateResponse(request, name, {"user": request.state.user, "auth": request.state.auth,
                                                      "version": __version__, **context})


async def runs_page(request: Request) -> Response:
    return _page(request, "runs.html", statuses=STATUSES, sortable=SORTABLE)


async def run_page(request: Request) -> Response:
    run_id = request.path_params["run_id"].upper()
    run = request.app.state.store.get_run(run_id, owner=request.state.user)
    if run is None:
        raise HTTPException(404, f"no run {run_id}")
    return _page(request, "run.html", run_id=run_id, application=run["application"])


async def login(request: Request) -> Response:
    store: Store = request.app.state.store
    if request.method == "POST":
        form = await request.form()
        key = str(form.get("key", "")).strip()
        if store.user_of_key(key) is None:
            return templates.TemplateResponse(request, "login.html", {"error": "That key is not valid.",
                                                                      "version": __version__}, status_code=401)
        request.session["key"] = key
        return RedirectResponse("/", status_code=303)
    return templates.TemplateResponse(request, "login.html", {"error": None, "version": __version__})


async def logout(request: Request) -> Response:
    request.session.clear()
    return RedirectResponse("/login", status_code=303)


ROUTES = [
    Route("/", runs_page, name="runs"),
    Route("/runs/{run_id:str}", run_page, name="run"),
    Route("/login", login, methods=["GET", "POST"], name="login"),
    Route("/logout", logout, methods=["POST"], name="logout"),
    Route("/api/health", api_health, name="api_health"),
    Route("/api/documents", post_documents, methods=["POST"], name="api_documents"),
    Route("/api/runs", api_runs, name="api_runs"),
    Route("/api/runs/{run_id:str}", api_run, name="api_run"),
    Route("/api/applications", api_applications, name="api_applications"),
    Mount("/static", StaticFiles(directory=os.path.join(HERE, "static")), name="static"),
]


async def _api_error(request: Request, exc: ApiError) -> Response:
    return render_error(request, exc.status, exc.code, exc.message)


async def _http_error(request: Request, exc: HTTPException) -> Response:
    return render_error(request, exc.status_code, CODES.get(exc.status_code, "error"), str(exc.detail))


async def _server_error(request: Request, exc: Exception) -> Response:
    return render_error(request, 500, "internal_error", "the monitor failed to answer this request")


def create_app(store: Store, require_key: bool = False) -> Starlette:
    app = Starlette(
        routes=ROUTES,
        middleware=[
            Middleware(SessionMiddleware, secret_key=store.secret(), session_cookie="logetl_session",
                       same_site="lax", https_only=False, max_age=14 * 86400),
            Middleware(AuthMiddleware, store=store, require_key=require_key),
        ],
        exception_handlers={ApiError: _api_error, HTTPException: _http_error, Exception: _server_error},
    )
    app.state.store = store
    app.state.started = time.time()
    return app
