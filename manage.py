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
        if sys.argv[1:2] == ["doctor"]:  # the doctor's own report: its config check failed
            from pool_admin.doctor.findings import settings_refused

            print(settings_refused(str(exc), as_json="--json" in sys.argv))
            sys.exit(1)
        sys.exit(f"manage.py: configuration: {exc} (README, Configuration)")


if __name__ == "__main__":
    main()
