#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pool_admin.settings")
    from django.core.management import execute_from_command_line

    from activity.env import EnvError

    try:
        execute_from_command_line(sys.argv)
    except EnvError as exc:  # raised while settings load: a one-line reason, not a traceback
        sys.exit(f"manage.py: configuration: {exc} (README, Configuration)")


if __name__ == "__main__":
    main()
