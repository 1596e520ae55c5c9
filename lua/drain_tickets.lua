-- drain_tickets.lua: a worker's pending drain tickets in required-epoch order.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] worker ID  ARGV[2] limit
-- Returns: {"ok": [{id, w, ae, re, sv, se, sc}]}
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 2, 'drain_tickets: arity')
local out = {}
for _, pid in ipairs(zread('ZRANGE', worker_draining_key(ARGV[1]), 0, tonum(ARGV[2]) - 1)) do
  local t = get_json(TICKETS, pid)
  t.id = pid
  out[#out + 1] = t
end
return ok(out)
