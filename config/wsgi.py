import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
_django = get_wsgi_application()

from config.chunked import reads_chunked_bodies  # noqa: E402 - needs the settings configured above

application = reads_chunked_bodies(_django)
