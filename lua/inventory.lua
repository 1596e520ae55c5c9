-- inventory.lua: ADR-005 "库存真值": the upstream's current unextracted, unexpired count.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (caller clock, ms)   ARGV[2] upstream ID   ARGV[3] scan_budget
-- Returns: {"ok": count}
-- Errors: scan_budget_exhausted (more expired records of the upstream than one scan cleans),
--         layout_mismatch
assert(#KEYS == 1 and #ARGV == 3, 'inventory: arity')
local now, u, budget = tonum(ARGV[1]), ARGV[2], tonum(ARGV[3])
local _, more = clean_expired(now, budget, expiry_key(u))
if more then return fail('scan_budget_exhausted') end
return ok(counter(INV, u))
