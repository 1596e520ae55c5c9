-- extractable.lua: the upstream's AVAILABLE, unowned, unexpired proxies (what an extract could
-- draw now), counted in the index without reading them: upstream_inventory's `extractable`
-- for an upstream of any size (the ownership manager's room).
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (caller clock, ms)   ARGV[2] upstream ID   ARGV[3] scan_budget
-- Returns: {"ok": count}
-- Errors: scan_budget_exhausted (more expired records of the upstream than one scan cleans),
--         layout_mismatch
assert(#KEYS == 1 and #ARGV == 3, 'extractable: arity')
local now, u, budget = tonum(ARGV[1]), ARGV[2], tonum(ARGV[3])
local _, more = clean_expired(now, budget, expiry_key(u))
if more then return fail('scan_budget_exhausted') end
return ok(count_above(named_key('upstream', u), now))
