"""lua/scheduler/: every operation documented and loaded, its error codes from the one table."""

from __future__ import annotations

import re

import pytest

from activity.errors import ERROR_CODES
from activity.lua_functions import LUA_DIR
from activity.scheduler.redis import OPERATIONS, SCHEDULER_LIBRARY
from tests.harness.lua import check_files_are_loaded, check_header

DIR = LUA_DIR / "scheduler"


@pytest.mark.parametrize("name", OPERATIONS)
def test_every_operation_documents_keys_argv_returns_and_errors(name):
    check_header(DIR / f"{name}.lua", name)


def test_every_file_is_the_library_or_an_operation_it_loads():
    check_files_are_loaded(SCHEDULER_LIBRARY, DIR)


def test_replies_use_only_the_shared_codes():
    used: set[str] = set()
    for path in DIR.glob("*.lua"):
        used |= set(re.findall(r"fail\('([a-z_]+)'", path.read_text()))
    assert used and used <= set(ERROR_CODES), used - set(ERROR_CODES)
