"""Engram settings: one module, every knob an environment variable read through strict helpers."""

from __future__ import annotations

import secrets
from pathlib import Path

import dj_database_url

from config.env import env_bool, env_float, env_int, env_list, env_str

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
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
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
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Shared cache backend (database) so that invalidation on one node reaches every node.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "engram_cache",
    }
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

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["api.authentication.AgentKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["api.permissions.HasPrincipal"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "api.exceptions.engram_exception_handler",
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
Q_CLUSTER = {
    "name": "engram",
    "orm": "default",
    "workers": env_int("ENGRAM_Q_WORKERS", 2),
    "timeout": 120,
    "retry": 180,  # > timeout, as django-q2 requires; a re-delivered task must be idempotent
    "max_attempts": 5,
    "ack_failures": True,
    "catch_up": False,
    "poll": 0.2,
    "sync": env_bool("ENGRAM_Q_SYNC", False),
    "label": "Tasks",
    "log_level": env_str("ENGRAM_Q_LOG_LEVEL", "WARNING"),
}

# --- Engram --------------------------------------------------------------------------------
# Principal tokens: default and maximum lifetime (seconds).
ENGRAM_PRINCIPAL_TOKEN_TTL = env_int("ENGRAM_PRINCIPAL_TOKEN_TTL", 3600)
ENGRAM_PRINCIPAL_TOKEN_MAX_TTL = env_int("ENGRAM_PRINCIPAL_TOKEN_MAX_TTL", 7 * 24 * 3600)
# Fernet keys for encrypted memory classes, newest first (MultiFernet rotation).
ENGRAM_FERNET_KEYS = env_list("ENGRAM_FERNET_KEYS", [])
# Longest text accepted in a record's text or an event's text.
ENGRAM_MAX_TEXT_CHARS = env_int("ENGRAM_MAX_TEXT_CHARS", 4000)
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
# Tombstones outlive the longest retry and consolidation window, then expire.
ENGRAM_TOMBSTONE_DAYS = env_int("ENGRAM_TOMBSTONE_DAYS", 30)
# A failing deletion step is retried this many times, waiting base * 2^attempt seconds between tries.
ENGRAM_DELETION_STEP_ATTEMPTS = env_int("ENGRAM_DELETION_STEP_ATTEMPTS", 3)
ENGRAM_DELETION_RETRY_BASE_SECONDS = env_float("ENGRAM_DELETION_RETRY_BASE_SECONDS", 0.5)
# Knowledge ingest: documents up to this many chunks are embedded in the request, larger ones by the worker;
# longer documents are refused.
ENGRAM_KNOWLEDGE_SYNC_EMBED_CHUNKS = env_int("ENGRAM_KNOWLEDGE_SYNC_EMBED_CHUNKS", 64)
ENGRAM_KNOWLEDGE_MAX_DOCUMENT_CHARS = env_int("ENGRAM_KNOWLEDGE_MAX_DOCUMENT_CHARS", 1_000_000)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("ENGRAM_LOG_LEVEL", "INFO")},
    "loggers": {"pgserver": {"level": "WARNING"}, "django_q": {"level": "WARNING"}},
}
