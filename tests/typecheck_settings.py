"""The settings mypy's Django plugin imports ([tool.django-stubs] in pyproject.toml).

The plugin imports a settings module to learn the apps and models; the project's own refuses to
load without a deployment's secrets unless POOL_DEV is set, and mypy must run anywhere. This one
only allows the development defaults first. It is never a settings module to run the project
with, which is why it lives under tests/ (not installed).
"""

import os

os.environ["POOL_DEV"] = "1"

from pool_admin.settings import *  # noqa: F403
