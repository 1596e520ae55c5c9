"""lua/scheduler/: every operation documented and loaded, its error codes from the one table."""

from __future__ import annotations

import re

import pytest

from activity.errors import ERROR_CODES
from activity.lua_functions import LUA_DIR, library
from activity.scheduler.redis import OPERATIONS, SCHEDULER_LIBRARY

DIR = LUA_DIR / "scheduler"


@pytest.mark.parametrize("name", OPERATIONS)
def test_every_operation_documents_keys_argv_returns_and_errors(name):
    text = (DIR / f"{name}.lua").read_text()
    header = text.split("\n\n")[0]
    for part in ("KEYS[1]", "ARGV[1]", "Returns:", "Errors:"):
        assert part in header, f"scheduler/{name}.lua header lacks {part}"
    assert f"'{name}: arity'" in text


def test_every_file_is_the_library_or_an_operation_it_loads():
    assert {p.stem for p in DIR.glob("*.lua")} == {"lib", *OPERATIONS}
    code, _ = library(SCHEDULER_LIBRARY)
    assert code.startswith("#!lua name=pp_sched_")
    assert all(f"'{name}_" in code for name in OPERATIONS)


def test_replies_use_only_the_shared_codes():
    used: set[str] = set()
    for path in DIR.glob("*.lua"):
        used |= set(re.findall(r"fail\('([a-z_]+)'", path.read_text()))
    assert used and used <= set(ERROR_CODES), used - set(ERROR_CODES)
