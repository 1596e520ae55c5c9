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
for _, pid in ipairs(ids) do
  local rec = get_rec(pid)
  if rec and rec.e > now then
    -- Every entry of this exit: "<digest>|<host>", and '}' is the byte after '|'.
    local low, high = '[' .. rec.k .. '|', '(' .. rec.k .. '}'
    local n = zread('ZLEXCOUNT', QUAR_EXITS, low, high)
    examined = examined + n
    if examined > budget then return fail('scan_budget_exhausted') end
    local hosts = {}
    if n > 0 then
      for _, entry in ipairs(zread('ZRANGEBYLEX', QUAR_EXITS, low, high)) do
        if tonumber(hget(QUAR, entry) or '0') > now then
          hosts[#hosts + 1] = string.sub(entry, #rec.k + 2)
        end
      end
    end
    if #hosts > 0 then out[#out + 1] = {pid, hosts} end
  end
end
return ok(out)
