-- read_runtime.lua: the worker's fresh runtime report (live session, unexpired), or null.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] worker ID
-- Returns: {"ok": runtime {sid, seq, sv, ep, en: {proxy ID: entry}, x} | null}
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 1, 'read_runtime: arity')
local rt = fresh_runtime(ARGV[1], server_ms())
if not rt then return ok(cjson.null) end
return ok(rt)
