import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
_django = get_wsgi_application()

# Both need the settings configured above.
from config.bulk_pool import forwards_bulk_requests, serves_forwarded_requests  # noqa: E402
from config.chunked import reads_chunked_bodies  # noqa: E402

# A chunked body is read whole first, so that a batch is forwarded with its length (config/bulk_pool.py).
application = reads_chunked_bodies(forwards_bulk_requests(serves_forwarded_requests(_django)))
