"""Where the project's servers are when nothing says otherwise: the settings' defaults and what
``make run``'s launcher and the test harness start servers for.

Plain constants, no imports: the settings read them without importing the dev-servers module
(``pool_admin.localservices``, which imports psycopg and redis).
"""

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/pool_admin"
