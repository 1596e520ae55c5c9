"""What every Lua function library keeps, whichever it is (the pool's, lua/; the fetch
scheduler's, lua/scheduler/; the usage stream's, lua/metrics/): one header test for all."""

from __future__ import annotations

from pathlib import Path

from activity.lua_functions import LUA_DIR, FunctionLibrary, library


def check_header(path: Path, name: str) -> None:
    """An operation's first paragraph says its KEYS, ARGV, Returns and Errors, and its code
    checks its arity under its own name."""
    text = path.read_text()
    header = text.split("\n\n")[0]
    for part in ("KEYS[1]", "ARGV[1]", "Returns:", "Errors:"):
        assert part in header, f"{path.relative_to(LUA_DIR)} header lacks {part}"
    assert f"'{name}: arity'" in text, f"{path.relative_to(LUA_DIR)} does not check its arity"


def check_files_are_loaded(spec: FunctionLibrary, directory: Path) -> None:
    """Every Lua file of ``directory`` is the library's shared part or an operation it loads,
    and the library is built under its name with every operation in it."""
    loaded = {p.stem for p in spec.shared} | {path.stem for _, path in spec.operations}
    assert {p.stem for p in directory.glob("*.lua")} == loaded
    code, _ = library(spec)
    assert code.startswith(f"#!lua name={spec.prefix}_")
    assert all(f"'{name}_" in code for name, _ in spec.operations)
