-- upstream_inventory.lua: ADR-005 pool.InventoryReader: managed and available slots of one
-- upstream, scanning only its own unassigned and assigned AVAILABLE indexes; fails closed.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (caller clock, ms)  ARGV[2] upstream ID  ARGV[3] scan_budget
-- Returns: {"ok": {managed, available_slots, extractable, gateway_held, gateway_capacity}}
--          (extractable: its AVAILABLE, unowned, unexpired proxies, what an extract could
--          draw now; gateway_held: its AVAILABLE proxies gateway workers hold without
--          draining, unexpired, the owned index above now; gateway_capacity: their max summed)
-- Errors: scan_budget_exhausted, layout_mismatch
assert(#KEYS == 1 and #ARGV == 3, 'upstream_inventory: arity')
local now, u, budget = tonum(ARGV[1]), ARGV[2], tonum(ARGV[3])
local _, more = clean_expired(now, budget, expiry_key(u))
if more then return fail('scan_budget_exhausted') end
local unassigned, assigned = named_key('upstream', u), owned_key(u)
local extractable = count_above(unassigned, now)
if extractable + count_above(assigned, now) > budget then
  return fail('scan_budget_exhausted')
end
local slots = 0
for _, pid in ipairs(range_above(unassigned, now, budget)) do slots = slots + get_rec(pid).m end
local snow = server_ms()
local runtimes = {}
-- The check above keeps both ranges whole: held and capacity are exact, never partial.
local held, capacity = 0, 0
for _, pid in ipairs(range_above(assigned, now, budget)) do
  local maximum = get_rec(pid).m
  held, capacity = held + 1, capacity + maximum
  local owner = get_owner(pid)
  local rt = runtimes[owner.w]
  if rt == nil then
    rt = fresh_runtime(owner.w, snow) or false
    runtimes[owner.w] = rt
  end
  if owner.l > now and rt and rt.ep >= owner.e then -- else: unknown runtime, fail closed
    local entry = rt.en[pid]
    if entry == nil then
      slots = slots + maximum -- sparse report: missing means idle
    elseif entry[2] == owner.e then
      slots = slots + math.max(0, maximum - entry[3] - entry[4])
    end
  end
end
return ok({managed = counter(MANAGED_COUNT, u), available_slots = slots,
           extractable = extractable, gateway_held = held, gateway_capacity = capacity})
