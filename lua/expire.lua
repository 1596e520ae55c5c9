-- expire.lua: ADR-005 Expire: reclaim at most `limit` assignments whose lease is due.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now ms  ARGV[2] limit
-- Returns: {"ok": [{id, w, e, l, d}, ...]} in lease order
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 2, 'expire: arity')
local now, limit = tonum(ARGV[1]), tonum(ARGV[2])
local expired = {}
for _, pid in ipairs(zread('ZRANGEBYSCORE', OWN_EXP, '-inf', now, 'LIMIT', 0, limit)) do
  local owner = get_owner(pid)
  release(pid)
  expired[#expired + 1] = owner_view(pid, owner)
end
finish_like_records()
return ok(expired)
