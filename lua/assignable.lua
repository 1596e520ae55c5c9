-- assignable.lua: the ownership manager's candidates of one upstream (port ControlStore): its
-- AVAILABLE, unowned proxies with at least min_remaining of usable life, the longest usable
-- first. Extract takes the soonest usable first from the same index, so the gateway and the
-- clients draw from its two ends. A read only: assign.lua decides. Its pair in Python:
-- activity/memory/sessions.py `WorkerSessions.assignable`.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (caller clock, ms)   ARGV[2] upstream ID   ARGV[3] limit
-- ARGV[4] min remaining ms
-- Returns: {"ok": {"proxies": [{id, m, uu}], "complete": bool}}: at most limit, limit + 1 read
--          to know whether more follow; one past its hard expiry is left out (sweep removes it)
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 4, 'assignable: arity')
local now, u, limit, min_remaining = tonum(ARGV[1]), ARGV[2], tonum(ARGV[3]), tonum(ARGV[4])
local page = zread('ZREVRANGEBYSCORE', named_key('upstream', u), '+inf',
  '(' .. (now + min_remaining), 'LIMIT', 0, limit + 1)
local items = {}
for i = 1, math.min(#page, limit) do
  local rec = get_rec(page[i])
  if rec and rec.e > now then items[#items + 1] = {id = page[i], m = rec.m, uu = rec.uu} end
end
return ok({proxies = items, complete = #page <= limit})
