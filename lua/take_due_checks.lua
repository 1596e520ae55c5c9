-- take_due_checks.lua: an upstream's idle proxies due for a recheck (RecheckPolicy), oldest
-- check first, each taken: its index score becomes `now`, so no other checker is handed it
-- for min_interval (a checker that dies leaves it due again then). EXTRACTED entries extract
-- left behind (lib/records.lua) are removed as they are examined. Its rule's pair in Python:
-- activity/memory/upsert.py `take_due_checks`, `_due`.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (caller clock, ms)   ARGV[2] upstream ID
-- ARGV[3] min_interval ms   ARGV[4] lifetime_fraction   ARGV[5] min_remaining ms
-- ARGV[6] limit (at most this many)   ARGV[7] scan_budget (index members one call examines)
-- Returns: {"ok": {"checks": [[state, checked ms, static JSON], ...], "complete": bool}}
--          (complete: every candidate was examined, so no due proxy was left out; the
--          key already lives to the horizon, so its score changes need no finish)
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 7, 'take_due_checks: arity')
local now, u = tonum(ARGV[1]), ARGV[2]
local min_interval, fraction, min_remaining = tonum(ARGV[3]), tonum(ARGV[4]), tonum(ARGV[5])
local limit, budget = tonum(ARGV[6]), tonum(ARGV[7])

-- Only members checked (or taken) at least min_interval ago can be due: one bounded read.
local members = zread('ZRANGEBYSCORE', checks_key(u), '-inf', now - min_interval,
                      'LIMIT', 0, budget + 1)
local complete = #members <= budget
local examined = {}
for i = 1, math.min(#members, budget) do examined[i] = members[i] end
prefetch(HOT, examined)

local function due(rec)
  local remaining = rec.uu - now
  if remaining <= 0 or remaining < min_remaining then return false end
  local elapsed = now - rec.ck
  if elapsed < min_interval then return false end
  if rec.s == 'suspect' or elapsed >= remaining then return true end
  -- elapsed < remaining here (under a year), so the product is exact in a double.
  return elapsed * fraction >= remaining
end

local key = checks_key(u)
local found = {}
for position, pid in ipairs(examined) do
  local rec = get_rec(pid)
  if not rec or not RECHECKED[rec.s] then
    zrem(key, pid)
  elseif due(rec) then
    found[#found + 1] = '["' .. rec.s .. '",' .. string.format('%d', rec.ck) .. ',' ..
      hget(R, pid) .. ']'
    zadd(key, now, pid)
    if #found == limit then
      complete = complete and position == #members
      break
    end
  end
end
return '{"ok":{"checks":[' .. table.concat(found, ',') .. '],"complete":' ..
  (complete and 'true' or 'false') .. '}}'
