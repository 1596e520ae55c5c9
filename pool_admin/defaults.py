"""Where the project's servers are when nothing says otherwise (the settings' defaults and what
``make run``'s launcher and the test harness start servers for), and the web server's defaults.

Plain constants, no imports: the settings read them without importing the dev-servers module
(``pool_admin.localservices``, which imports psycopg and redis).
"""

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/pool_admin"

#: Threads per web worker running the application (settings.WEB_THREADS). Measured with
#: bench/api.py at 32 clients: 1 thread ~1,390 requests/s, 2 threads ~1,490 (p99 40-44 ms), 4
#: ~1,550 but p99 up to 70 ms (granian WSGI, docs/PERFORMANCE.md).
WEB_THREADS = 2
#: Seconds a request body may take to arrive after its headers before it is answered 408
#: (settings.WEB_BODY_TIMEOUT_S, pool_admin/rsgi_bridge.py).
WEB_BODY_TIMEOUT_S = 5
