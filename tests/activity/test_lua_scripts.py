"""The Lua scripts' headers agree with the code: arity, and the shared error-code table."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from activity.errors import ERROR_CODES
from activity.redis._scripts import LUA_DIR, SCRIPT_NAMES, script_source
from tests.harness.lua import check_header


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_every_script_documents_keys_argv_returns_and_errors(name):
    """CONVENTIONS: one script per atomic operation, a header in every script."""
    check_header(LUA_DIR / f"{name}.lua", name)


def test_error_headers_and_replies_use_only_the_shared_codes():
    """CONVENTIONS: one code table shared by Lua and Python (no drift)."""
    codes_in_headers: set[str] = set()
    codes_in_replies: set[str] = set()
    for name in SCRIPT_NAMES:
        text = (LUA_DIR / f"{name}.lua").read_text()
        errors = re.search(r"-- Errors:(.*?)\n(?!--\s{2,})", text, re.S)
        assert errors, name
        codes_in_headers |= set(re.findall(r"\b([a-z]+(?:_[a-z]+)+)\b", errors.group(1)))
        codes_in_replies |= set(re.findall(r"fail\('([a-z_]+)'", script_source(name)))
    assert codes_in_replies <= set(ERROR_CODES), codes_in_replies - set(ERROR_CODES)
    documented = codes_in_headers & set(ERROR_CODES)
    assert codes_in_replies - {"layout_mismatch"} <= documented


def test_every_script_file_is_loaded():
    """No orphan script: every .lua file but the library is an operation RedisPool runs."""
    files = {p.stem for p in LUA_DIR.glob("*.lua")} - {"lib"}
    assert files == set(SCRIPT_NAMES)


def test_importing_the_domain_does_not_import_a_redis_client():
    """The gateway runtime may use activity's types without importing Redis."""
    code = "import sys, activity; assert 'redis' not in sys.modules, 'redis imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_refusal_reasons_are_the_shared_reason_codes():
    """MemoryPool and RedisPool must refuse with the same reason, so no free text in Lua."""
    from activity.errors import (
        OUTCOME_REASONS,
        OWNERSHIP_REASONS,
        QUOTA_REASONS,
        REPORT_REASONS,
        SNAPSHOT_REASONS,
    )

    allowed = set(OWNERSHIP_REASONS) | set(REPORT_REASONS) | set(SNAPSHOT_REASONS)
    allowed |= set(OUTCOME_REASONS) | set(QUOTA_REASONS)
    for name in SCRIPT_NAMES:
        for reason in re.findall(r"fail\('[a-z_]+', '([^']*)'", script_source(name)):
            assert reason in allowed, f"{name}.lua: {reason!r}"
