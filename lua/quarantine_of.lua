-- quarantine_of.lua: for the reconciler, the banned target hosts of given proxies' exits.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (the caller's, ms)   ARGV[2] JSON array of proxy IDs (validated, each once)
-- ARGV[3] scan_budget (quarantine entries one call may examine)
-- Returns: {"ok": [[proxy ID, [host, ...]], ...]}: live proxies whose exit has a quarantine
--          that has not ended at `now` ("*": every host); the others are left out
-- Errors: scan_budget_exhausted (more entries than the budget), layout_mismatch
assert(#KEYS == 1 and #ARGV == 3, 'quarantine_of: arity')
local now, ids, budget = tonum(ARGV[1]), cjson.decode(ARGV[2]), tonum(ARGV[3])
local out, examined = {}, 0
prefetch(HOT, ids)
for _, pid in ipairs(ids) do
  local rec = get_rec(pid)
  if rec and rec.e > now then
    -- Every entry of this exit: "<digest>|<host>", and '}' is the byte after '|'. One read,
    -- never more than what is left of the budget (plus one, to know it ran out).
    local low, high = '[' .. rec.k .. '|', '(' .. rec.k .. '}'
    local entries = zread('ZRANGEBYLEX', QUAR_EXITS, low, high, 'LIMIT', 0, budget - examined + 1)
    examined = examined + #entries
    if examined > budget then return fail('scan_budget_exhausted') end
    local hosts = {}
    for _, entry in ipairs(entries) do
      if tonumber(hget(QUAR, entry) or '0') > now then
        hosts[#hosts + 1] = string.sub(entry, #rec.k + 2)
      end
    end
    if #hosts > 0 then out[#out + 1] = {pid, hosts} end
  end
end
return ok(out)
