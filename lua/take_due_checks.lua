-- take_due_checks.lua: an upstream's idle proxies due for a recheck (RecheckPolicy), oldest
-- check first, each taken: its index score becomes `now`, so no other checker is handed it
-- for min_interval (a checker that dies leaves it due again then). Entries of records no
-- longer to be checked (extracted, unhealthy, ...: lib/records.lua) are removed as they are
-- examined. Its rule's pair in Python: activity/memory/upsert.py `take_due_checks`,
-- `_standing`.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (caller clock, ms)   ARGV[2] upstream ID
-- ARGV[3] min_interval ms   ARGV[4] lifetime_fraction   ARGV[5] min_remaining ms
-- ARGV[6] limit (at most this many)   ARGV[7] scan_budget (index members one call examines)
-- ARGV[8] "1": AVAILABLE proxies are rechecked too; "0": only unchecked and SUSPECT ones
-- Returns: {"ok": {"checks": [[state, checked ms or null, static JSON], ...], "complete": bool}}
--          (complete: every candidate was examined, so no due proxy was left out; the
--          key already lives to the horizon, so its score changes need no finish)
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 8, 'take_due_checks: arity')
local now, u = tonum(ARGV[1]), ARGV[2]
local min_interval, fraction, min_remaining = tonum(ARGV[3]), tonum(ARGV[4]), tonum(ARGV[5])
local limit, budget = tonum(ARGV[6]), tonum(ARGV[7])
local available = ARGV[8] == '1'
-- Unchecked FETCHED records are indexed too (upsert.lua, by their fetch time): one whose
-- intake check never came (its worker died) is checked here.
local TAKEABLE = {available = true, suspect = true, fetched = true}

-- Only members checked (or taken) at least min_interval ago can be due: one bounded read.
local members = zread('ZRANGEBYSCORE', checks_key(u), '-inf', now - min_interval,
                      'LIMIT', 0, budget + 1)
local complete = #members <= budget
local examined = {}
for i = 1, math.min(#members, budget) do examined[i] = members[i] end
prefetch(HOT, examined)

-- How a member stands (the pair of `_standing` in activity/memory/upsert.py): true when due;
-- else the score to give it, so that it is examined again only when it may be due (its due
-- time less min_interval, read by the range above) or, when it never will be under this
-- policy, not before its usable_until. Re-scoring what is examined and not due keeps the scan
-- moving: members that are not due never pile up at the front and hide the due ones.
local function ceil_div(x, d)  -- exact for the integers here (x < 2^53)
  local q = math.floor(x / d)
  if q * d < x then q = q + 1 end
  if (q - 1) * d >= x then q = q - 1 end
  return q
end
local function standing(rec)
  local remaining = rec.uu - now
  if remaining <= 0 or remaining < min_remaining then return rec.uu end
  if not rec.ck or rec.s == 'suspect' then return true end  -- a first or a deciding check
  if not available then return rec.uu end
  local elapsed = now - rec.ck
  -- elapsed < remaining below (under a year), so the product is exact in a double.
  if elapsed >= min_interval and (elapsed >= remaining or elapsed * fraction >= remaining) then
    return true
  end
  -- Due at t with t - ck >= (uu - t) / fraction: t >= ck + (uu - ck) / (fraction + 1).
  local at = math.max(rec.ck + min_interval, rec.ck + ceil_div(rec.uu - rec.ck, fraction + 1))
  if rec.uu - at < min_remaining then return rec.uu end
  return at - min_interval
end

local key = checks_key(u)
local found = {}
for position, pid in ipairs(examined) do
  local rec = get_rec(pid)
  if not rec or not TAKEABLE[rec.s] then
    zrem(key, pid)  -- extracted, unhealthy, removed or checking since it was indexed
  else
    local score = standing(rec)
    if score == true then
      found[#found + 1] = '["' .. rec.s .. '",' .. (rec.ck and string.format('%d', rec.ck) or
        'null') .. ',' .. hget(R, pid) .. ']'
      zadd(key, now, pid)
      if #found == limit then
        complete = complete and position == #members
        break
      end
    else
      zadd(key, score, pid)
    end
  end
end
return '{"ok":{"checks":[' .. table.concat(found, ',') .. '],"complete":' ..
  (complete and 'true' or 'false') .. '}}'
