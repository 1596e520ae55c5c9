-- proxy_detail.lua: one live proxy whole for the console (port PoolInspector), read only: its
-- record, its health fields (last success, latency, failure), its owner. Its pair in Python:
-- activity/memory/inspection.py `Inspector.proxy_detail`.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (caller clock, ms)   ARGV[2] proxy ID
-- Returns: {"ok": null} (none live), or {"ok": [state, checked ms or null, extracted by or
--          null, owner {w, e, l, d} or null, "success|latency|failure", static JSON]}
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 2, 'proxy_detail: arity')
local now, pid = tonum(ARGV[1]), ARGV[2]
local rec = get_rec(pid)
if not rec or rec.e <= now then return '{"ok":null}' end
local owner = get_owner(pid)
local state = (owner and owner.d) and 'draining' or rec.s
local head = cjson.encode({state, rec.ck or cjson.null, rec.x or cjson.null,
                           owner or cjson.null, hget(HEALTH, pid) or '||'})
return '{"ok":' .. head:sub(1, -2) .. ',' .. hget(R, pid) .. ']}'
