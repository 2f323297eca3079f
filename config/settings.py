"""Engram settings: one module, every knob an environment variable read through strict helpers."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_float, env_int, env_list, env_networks, env_rate, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"


def _dev_secret_key() -> str:
    # A fresh clone gets a stable random key kept under var/ (git-ignored). Production sets
    # ENGRAM_SECRET_KEY; every web and worker node must share it (it signs principal tokens).
    path = VAR_DIR / "secret_key"
    if not path.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = env_str("ENGRAM_SECRET_KEY") or _dev_secret_key()
DEBUG = env_bool("ENGRAM_DEBUG", False)
ALLOWED_HOSTS = env_list("ENGRAM_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("ENGRAM_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "django_q",
    "memory",
    "memory.identity",
    "memory.records",
    "memory.retrieval",
    "memory.threads",
    "memory.knowledge",
    "memory.deletion",
    "memory.evaluation",
    "procedures",
    "review",
    "api",
]

MIDDLEWARE = [
    # First: every later middleware's log lines carry the request id, and every response is timed.
    "config.observability.RequestTracingMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "review.middleware.UnstorableInputMiddleware",  # after the CSRF check, before api's plain-text refusal
    "api.middleware.JsonErrorsForApiMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "review.context_processors.navigation",
            ],
        },
    },
]

# --- Database ------------------------------------------------------------------------------
# DATABASE_URL: any PostgreSQL with pgvector. Unset: the embedded pgserver under var/pgdata.
DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
else:
    from config.embedded_db import APP_DB_NAME, ensure_server

    # ENGRAM_DB_NAME (below) names another database of the same server; create it if missing.
    _db_name = env_str("ENGRAM_DB_NAME") or APP_DB_NAME
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": _db_name,
            "USER": "postgres",
            "HOST": ensure_server(BASE_DIR, database=_db_name),
            "CONN_MAX_AGE": 60,
        }
    }
# ENGRAM_DB_NAME points a process at another database of the same server: tests start a real
# qcluster subprocess with it set to the test database.
if env_str("ENGRAM_DB_NAME"):
    DATABASES["default"]["NAME"] = env_str("ENGRAM_DB_NAME")
# Separate test database names let several test runs share one server (ENGRAM_TEST_DB_NAME).
DATABASES["default"].setdefault("TEST", {})
if env_str("ENGRAM_TEST_DB_NAME"):
    DATABASES["default"]["TEST"]["NAME"] = env_str("ENGRAM_TEST_DB_NAME")
# Django's PostgreSQL backend, aware of the (id, tenant_id) primary keys of the tables distributed by tenant.
DATABASES["default"]["ENGINE"] = "config.database"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Shared cache backend (database) so that invalidation on one node reaches every node. "default" holds
# disposable cached results and is cleared whole by a deletion; "coordination" holds what a deletion must not
# wipe: the workers' heartbeats (the health check's worker status). Rate-limit counters have a table of their
# own (api.models.ThrottleCounter: one atomic upsert a request).
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "engram_cache",
    },
    "coordination": {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "engram_coordination",
        "OPTIONS": {"MAX_ENTRIES": 100_000},
    },
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# WhiteNoise serves static files from the app directories directly: no collectstatic step.
WHITENOISE_USE_FINDERS = True

# Bodies above this are refused with 400 payload_too_large (a batch of 500 items fits).
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("ENGRAM_MAX_BODY_BYTES", 5 * 1024 * 1024)
# JSON bodies nested deeper than this are refused with 400 too_deep (a batch item's own nesting counts from
# the body's top level).
ENGRAM_MAX_JSON_DEPTH = env_int("ENGRAM_MAX_JSON_DEPTH", 64)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["api.authentication.AgentKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["api.permissions.HasPrincipal"],
    # JSON only, checked as a whole (NUL, lone surrogates, 64-bit integers, depth) before any view runs.
    "DEFAULT_PARSER_CLASSES": ["api.parsers.EngramJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "api.exceptions.engram_exception_handler",
    # Rate limits per agent key (and per address without one), counted in PostgreSQL so every process and
    # node enforces the same limit: 429 {"code": "throttled"} with Retry-After. "off" disables one.
    "DEFAULT_THROTTLE_CLASSES": ["api.throttling.AgentKeyThrottle", "api.throttling.AnonymousThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "agent_key": env_rate("ENGRAM_THROTTLE_KEY_RATE", "6000/min"),
        "anonymous": env_rate("ENGRAM_THROTTLE_ANON_RATE", "600/min"),
    },
    "DEFAULT_SCHEMA_CLASS": "api.openapi.EngramAutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Engram API",
    "VERSION": "1.0.0",
    "DESCRIPTION": (
        "Governed long-term memory for AI agents.\n\n"
        "Every call but `GET /api/v1/health` carries the agent key (`Authorization: Bearer egk_…`); every "
        "call that acts for a subject also carries a principal token (`X-Engram-Principal: ept_…`, minted by "
        "the tenant's backend with `POST /api/v1/principal-tokens`). The scope of a call is the key's "
        "permissions and the namespaces both the key and the token allow.\n\n"
        "Errors are `{\"code\", \"detail\"}` (plus `errors` per field when the code is `invalid`); each "
        "operation lists the codes it can give. Another subject's or tenant's object answers 404 exactly "
        "like a missing one. Writes are safe to retry: each carries its idempotency key (`source.event_id`, "
        "`Idempotency-Key`, a tool call's key)."
    ),
    "GET_LIB_DOC_EXCLUDES": "api.openapi.doc_excludes",
    # The tags with their descriptions, in the order the docs show them; what path parameters name.
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "api.openapi.tags_and_path_parameters"],
    # Request and response components apart: what a client sends is not what it gets back.
    "COMPONENT_SPLIT_REQUEST": True,
    # The one PATCH (a tool call's outcome) takes a whole body, not a partial one.
    "COMPONENT_SPLIT_PATCH": False,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    # The schema endpoint does not describe itself; the docs pages are not operations either.
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": [],
    "SERVE_AUTHENTICATION": [],
    # Swagger UI and ReDoc from drf-spectacular-sidecar's static files: no request leaves the host.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "displayOperationId": True, "validatorUrl": None},
    # Choice sets that several fields share get one name each (instead of a name guessed from a field).
    "ENUM_NAME_OVERRIDES": {
        "MemoryTypeEnum": "memory.models.MemoryType",
        "RecordStatusEnum": "memory.models.RecordStatus",
        "SourceTypeEnum": "memory.models.SourceType",
        "EventKindEnum": "memory.threads.models.EventKind",
        "EventStatusEnum": "memory.threads.models.ThreadEvent.Status",
        "DeletionStatusEnum": "memory.deletion.models.DeletionJob.Status",
        "ConfidenceEnum": "memory.models.Confidence",
        "ApprovedEnum": ["approved"],
        "KnowledgeEnum": ["knowledge"],
        "ServiceStateEnum": ["ok", "down"],
    },
}

# --- django-q2 -----------------------------------------------------------------------------
# Three queues, each served by its own qcluster (`manage.py workers` starts all three; `serve` too), so that
# no class of work waits behind another (memory/tasks.py routes every task):
#   urgent  - deletion and erasure jobs: privacy work a person is waiting on, never behind an import;
#   engram  - short interactive work: one record's embedding, consolidation, summaries, schedules;
#   bulk    - batch imports' embeddings and document embeddings: large, and fine to run behind the others.
# A task a worker claimed is leased for `retry` seconds: if the worker dies (SIGKILL, a lost node) the task
# is delivered again after the lease expires, and every task is safe to run twice.
#
# The bulk queue's worker processes. One by default, with every core for the model (below): one single-threaded
# process per core derived imports of 1,000-10,000 turns 9-18% faster end to end, but takes more from the batch writes
# beside it and from the reads during an import (docs/benchmarks.md, "One bulk worker per core"); a host whose
# imports must become searchable sooner can set ENGRAM_Q_BULK_WORKERS to its cores, and each worker then gets one
# thread. Each worker process holds its own copy of the model.
_CORES = os.cpu_count() or 1
ENGRAM_Q_BULK_WORKERS = env_int("ENGRAM_Q_BULK_WORKERS", 1)
Q_CLUSTER = {
    "name": "engram",  # the default (interactive) queue; also the signing salt every queue shares
    "orm": "default",
    "workers": env_int("ENGRAM_Q_WORKERS", 1),
    "timeout": 120,
    "retry": 180,  # > timeout, as django-q2 requires; a re-delivered task must be idempotent
    "max_attempts": 5,
    "ack_failures": True,
    "catch_up": False,
    "poll": 0.2,
    "sync": env_bool("ENGRAM_Q_SYNC", False),
    "label": "Tasks",
    "log_level": env_str("ENGRAM_Q_LOG_LEVEL", "WARNING"),
    # Worker heartbeats, out of reach of the deletion's cache purge (which would report the workers down).
    "cache": "coordination",
    "ALT_CLUSTERS": {
        "urgent": {
            "workers": env_int("ENGRAM_Q_URGENT_WORKERS", 1),
            "timeout": env_int("ENGRAM_Q_URGENT_TIMEOUT", 120),
            # A job claimed by a worker that died is picked up again this many seconds after the claim.
            "retry": env_int("ENGRAM_Q_URGENT_RETRY", 150),
            "max_attempts": 0,  # retried until it completes: a deletion is never given up by the queue
            "poll": 0.1,
        },
        "bulk": {
            "workers": ENGRAM_Q_BULK_WORKERS,
            "timeout": 600,
            "retry": 660,
        },
    },
}
# Threads each process gives the embedding model (ONNX Runtime's or torch's intra-op threads). The bulk workers
# share the cores between them (they run at a lower CPU priority, ENGRAM_Q_BULK_NICE, so web requests and
# deletions come first); the other workers and each web worker get one thread: more threads than cores, across
# processes, only slow each other down.
ENGRAM_BULK_EMBED_THREADS = env_int("ENGRAM_BULK_EMBED_THREADS", max(1, _CORES // max(1, ENGRAM_Q_BULK_WORKERS)))
# The lowest priority there is: below the bulk pool's batch writes too (ENGRAM_WEB_BULK_NICE), which at 10 still
# shared the cores with it during an import (docs/benchmarks.md, "The bulk worker below the batch writes").
ENGRAM_Q_BULK_NICE = env_int("ENGRAM_Q_BULK_NICE", 19)
# The web processes that serve batch writes (config/bulk_pool.py) run at this nice value: reads come first.
ENGRAM_WEB_BULK_NICE = env_int("ENGRAM_WEB_BULK_NICE", 5)
# The embedding model's directory (a sentence-transformers model); empty: the packaged all-MiniLM-L6-v2.
ENGRAM_EMBEDDING_MODEL_PATH = env_str("ENGRAM_EMBEDDING_MODEL_PATH", "")
# After the model fails, retrieval runs lexical-only and the model is tried again after this many seconds.
ENGRAM_EMBEDDER_RETRY_SECONDS = env_float("ENGRAM_EMBEDDER_RETRY_SECONDS", 30.0)
# Load the embedding model when a worker or web process starts instead of in its first task or request
# (about 8 s of torch import).
ENGRAM_WARMUP = env_bool("ENGRAM_WARMUP", True)
# Web and worker processes started by `serve`/`workers` ask glibc's malloc for transparent huge pages
# (memory/workqueues.py malloc_env): the model's weights are read whole for every query embedding.
ENGRAM_HUGE_PAGES = env_bool("ENGRAM_HUGE_PAGES", True)

# --- Engram --------------------------------------------------------------------------------
# Principal tokens: default and maximum lifetime (seconds).
ENGRAM_PRINCIPAL_TOKEN_TTL = env_int("ENGRAM_PRINCIPAL_TOKEN_TTL", 3600)
ENGRAM_PRINCIPAL_TOKEN_MAX_TTL = env_int("ENGRAM_PRINCIPAL_TOKEN_MAX_TTL", 7 * 24 * 3600)
# Fernet keys for encrypted memory classes, newest first (MultiFernet rotation).
ENGRAM_FERNET_KEYS = env_list("ENGRAM_FERNET_KEYS", [])
# Longest text accepted in a record's text or an event's text.
ENGRAM_MAX_TEXT_CHARS = env_int("ENGRAM_MAX_TEXT_CHARS", 4000)
# Largest JSON ``data`` of one thread event (bytes): a framework's conversation item (a tool's output,
# an encrypted envelope) is stored there whole, so it gets more room than a record's fact value.
ENGRAM_MAX_EVENT_DATA_BYTES = env_int("ENGRAM_MAX_EVENT_DATA_BYTES", 256 * 1024)
# Thread state (events, summaries, checkpoints, tool calls) idle this long is deleted daily; 0 keeps it.
ENGRAM_THREAD_RETENTION_DAYS = env_int("ENGRAM_THREAD_RETENTION_DAYS", 90)
# Thread summarizer: the OpenAI-compatible adapter is on only when a URL is set (e.g. https://host/v1);
# unset, the deterministic extractive summarizer runs with no external service.
ENGRAM_SUMMARIZER_URL = env_str("ENGRAM_SUMMARIZER_URL", "")
ENGRAM_SUMMARIZER_MODEL = env_str("ENGRAM_SUMMARIZER_MODEL", "default")
ENGRAM_SUMMARIZER_API_KEY = env_str("ENGRAM_SUMMARIZER_API_KEY", "")
ENGRAM_SUMMARIZER_TIMEOUT = env_int("ENGRAM_SUMMARIZER_TIMEOUT", 30)  # seconds
# Procedure poison flags: hosts/domains a proposal may add without a new_contact flag (comma-separated).
ENGRAM_PROCEDURE_ALLOWED_HOSTS = env_list("ENGRAM_PROCEDURE_ALLOWED_HOSTS", [])
# Retrieval logs quote content: kept at most this long (shorter when a quoted class's TTL is shorter).
ENGRAM_RETRIEVAL_LOG_DAYS = env_int("ENGRAM_RETRIEVAL_LOG_DAYS", 30)
# The embed_pending sweep leaves records younger than this (seconds) to the task their write queued.
ENGRAM_EMBED_PENDING_GRACE = env_int("ENGRAM_EMBED_PENDING_GRACE", 600)
# A conversation turn's context window gets its vector as the mean of its turns' own vectors, each weighted by its
# length in tokens ("mean": no second model pass over the window; LoCoMo held-out recall@10 0.759), or from the
# model over the window's text ("model": about six times the model time per turn, recall@10 0.753); docs/retrieval.md.
ENGRAM_CONTEXT_VECTOR = env_str("ENGRAM_CONTEXT_VECTOR", "mean")
if ENGRAM_CONTEXT_VECTOR not in ("mean", "model"):
    raise ImproperlyConfigured("ENGRAM_CONTEXT_VECTOR must be 'mean' or 'model'")
# A subject with at least this many records gets its own search indexes and BM25 statistics, built by the worker
# (memory/retrieval/subject_index.py); smaller subjects are scored by an exact scan of their rows. The scan costs about
# 10 µs per record, a retrieve through a subject's indexes about the same at any size as the scan of 800 records
# (docs/retrieval.md "Large subjects").
ENGRAM_SUBJECT_INDEX_THRESHOLD = env_int("ENGRAM_SUBJECT_INDEX_THRESHOLD", 1000)
# At most this many subjects have their own indexes at a time (the largest, see subject_index.has_room). Each adds
# four partial indexes to the shared records and windows tables, and PostgreSQL weighs every one of them whenever it
# plans a statement on those tables: with 500 subjects indexed, planning a record's read by id took 30 times as long
# (bench/subject_indexes.py; docs/retrieval.md "Large subjects"). A subject past the threshold beyond the cap is
# scored by the exact scan, as a smaller one is.
ENGRAM_SUBJECT_INDEX_MAX_SUBJECTS = env_int("ENGRAM_SUBJECT_INDEX_MAX_SUBJECTS", 200)
# The most maintenance_work_mem one subject's index build gets (4 kB per record, at least 64 MB; that build only).
ENGRAM_SUBJECT_INDEX_BUILD_MEMORY = env_str("ENGRAM_SUBJECT_INDEX_BUILD_MEMORY", "1GB")
# Retrieval's tunable choices (docs/retrieval.md "Tunable choices"): every weight, line, blend factor and pool size
# ranking uses, read once per process, so a benchmark can set them per run (bench/locomo.py --folds) and choose them
# on one half of a development set while it reports on the other.
ENGRAM_RECALL = {
    "bm25_k1": env_float("ENGRAM_RECALL_BM25_K1", 1.5),
    # Little length normalisation: a turn's length is mostly its context window's, and a long turn is not less about
    # a word it holds (b 0.75, Okapi's usual value, lost recall on both halves of the development set).
    "bm25_b": env_float("ENGRAM_RECALL_BM25_B", 0.1),
    "context_term_weight": env_float("ENGRAM_RECALL_CONTEXT_TERM_WEIGHT", 0.5),
    "own_weight": env_float("ENGRAM_RECALL_OWN_WEIGHT", 0.3),
    "w_lexical": env_float("ENGRAM_RECALL_W_LEXICAL", 0.6),
    "gate_similarity": env_float("ENGRAM_RECALL_GATE_SIMILARITY", 0.3),
    "lexical_knee": env_float("ENGRAM_RECALL_LEXICAL_KNEE", 0.5),
    "line_fraction": env_float("ENGRAM_RECALL_LINE_FRACTION", 0.5),
    # The line is also drawn over the candidates' similarities alone (memory/retrieval/ranking.py ``classify``).
    "similarity_line": env_bool("ENGRAM_RECALL_SIMILARITY_LINE", True),
    "strong_similarity": env_float("ENGRAM_RECALL_STRONG_SIMILARITY", 0.5),
    "strong_lexical": env_float("ENGRAM_RECALL_STRONG_LEXICAL", 0.5),
    "pool_factor": env_int("ENGRAM_RECALL_POOL_FACTOR", 4),
    "pool_min": env_int("ENGRAM_RECALL_POOL_MIN", 40),
    # A record that contains a name the question contains gets this much relevance more (memory/retrieval/names.py);
    # 0: off.
    "name_bonus": env_float("ENGRAM_RECALL_NAME_BONUS", 0.1),
    # How much of a record's closeness to what the whole subject says is taken off its similarity
    # (memory/retrieval/centroid.py); 0: off.
    "generic": env_float("ENGRAM_RECALL_GENERIC", 0.3),
}
# Tombstones outlive the longest retry and consolidation window, then expire.
ENGRAM_TOMBSTONE_DAYS = env_int("ENGRAM_TOMBSTONE_DAYS", 30)
# A failing deletion step is retried this many times, waiting base * 2^attempt seconds between tries.
ENGRAM_DELETION_STEP_ATTEMPTS = env_int("ENGRAM_DELETION_STEP_ATTEMPTS", 3)
ENGRAM_DELETION_RETRY_BASE_SECONDS = env_float("ENGRAM_DELETION_RETRY_BASE_SECONDS", 0.5)
# The deletion journal: one content-free line per requested deletion, kept OUTSIDE the database so that a
# restore of an older backup re-applies the deletions asked for since (memory/deletion/journal.py). Keep it on
# storage that outlives the database's (not inside the PostgreSQL data directory or its volume snapshot).
ENGRAM_DELETION_JOURNAL = Path(env_str("ENGRAM_DELETION_JOURNAL") or str(VAR_DIR / "deletion-journal"))
# Where `manage.py backup` writes its archives when no path is given.
ENGRAM_BACKUP_DIR = Path(env_str("ENGRAM_BACKUP_DIR") or str(VAR_DIR / "backups"))
# A job whose run failed stays pending and is run again by the sweep (every minute) after
# base * 2^retry seconds, this many times, before it ends failed (`manage.py deletion_retry` retries it by hand).
ENGRAM_DELETION_JOB_RETRIES = env_int("ENGRAM_DELETION_JOB_RETRIES", 5)
ENGRAM_DELETION_JOB_RETRY_SECONDS = env_float("ENGRAM_DELETION_JOB_RETRY_SECONDS", 30.0)
# Knowledge ingest: documents up to this many chunks are embedded in the request, larger ones by the worker;
# longer documents are refused.
ENGRAM_KNOWLEDGE_SYNC_EMBED_CHUNKS = env_int("ENGRAM_KNOWLEDGE_SYNC_EMBED_CHUNKS", 64)
ENGRAM_KNOWLEDGE_MAX_DOCUMENT_CHARS = env_int("ENGRAM_KNOWLEDGE_MAX_DOCUMENT_CHARS", 1_000_000)

# --- Production ---------------------------------------------------------------------------
# ENGRAM_PRODUCTION=1 switches on everything `manage.py check --deploy` asks for: HTTPS redirect (health
# exempt, for load balancers probing over plain HTTP), HSTS, secure session and CSRF cookies; it also
# refuses to start without ENGRAM_SECRET_KEY or with debug on. Each knob can still be set on its own.
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (and strips a client's own), set
# ENGRAM_BEHIND_PROXY=1 so requests it forwarded as HTTPS count as secure.
ENGRAM_PRODUCTION = env_bool("ENGRAM_PRODUCTION", False)
if ENGRAM_PRODUCTION:
    if not env_str("ENGRAM_SECRET_KEY"):
        raise ImproperlyConfigured("ENGRAM_PRODUCTION needs ENGRAM_SECRET_KEY, shared by every node.")
    if DEBUG:
        raise ImproperlyConfigured("ENGRAM_PRODUCTION and ENGRAM_DEBUG cannot both be on.")
SECURE_SSL_REDIRECT = env_bool("ENGRAM_SSL_REDIRECT", ENGRAM_PRODUCTION)
# Health for load balancers; metrics for a scraper on this host (gunicorn's own plain-HTTP port).
SECURE_REDIRECT_EXEMPT = [r"^api/v1/health$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("ENGRAM_HSTS_SECONDS", 31_536_000 if ENGRAM_PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("ENGRAM_HSTS_INCLUDE_SUBDOMAINS", ENGRAM_PRODUCTION)
# Only a header: a domain is on browsers' preload lists after its owner submits it.
SECURE_HSTS_PRELOAD = env_bool("ENGRAM_HSTS_PRELOAD", ENGRAM_PRODUCTION)
SESSION_COOKIE_SECURE = env_bool("ENGRAM_SECURE_COOKIES", ENGRAM_PRODUCTION)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
if env_bool("ENGRAM_BEHIND_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# The proxies whose X-Forwarded-For names the client (api/client_ip.py): addresses or CIDR networks. None by
# default: any client can write that header, so trusting it by default lets one client be many (throttling).
ENGRAM_TRUSTED_PROXIES = env_networks("ENGRAM_TRUSTED_PROXIES")

# --- Operations: metrics and logs -------------------------------------------------------------
# GET /metrics answers loopback requests; anyone else must send `Authorization: Bearer <this token>`
# (unset: loopback only). docs/operations.md lists the metrics.
ENGRAM_METRICS_TOKEN = env_str("ENGRAM_METRICS_TOKEN", "")
# "plain" lines, or "json": one JSON object a line (gunicorn's access and error lines too, config/gunicorn.py).
ENGRAM_LOG_FORMAT = env_str("ENGRAM_LOG_FORMAT", "plain").strip().lower()
if ENGRAM_LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"ENGRAM_LOG_FORMAT must be plain or json, got {ENGRAM_LOG_FORMAT!r}")

# Every line carries the id of the request it belongs to (or of the request that queued the task a worker
# runs; "-" for neither): memory/tracing.py.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "memory.tracing.RequestIdFilter"},
                # Lines that repeat a request's path or query string have secrets redacted (config/log_redaction.py).
                "redact_secrets": {"()": "config.log_redaction.RedactSecrets"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s request_id=%(request_id)s %(message)s"},
        "json": {"()": "memory.tracing.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": ENGRAM_LOG_FORMAT,
                             "filters": ["request_id"]}},
    "root": {"handlers": ["console"], "level": env_str("ENGRAM_LOG_LEVEL", "INFO")},
    "loggers": {"pgserver": {"level": "WARNING"}, "django_q": {"level": "WARNING"},
                **{name: {"filters": ["redact_secrets"]} for name in (
                    "django.request", "django.server", "django.security", "engram.api")}},
}
