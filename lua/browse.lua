-- browse.lua: a page of the pool for the console (port PoolInspector), read only: records in
-- the order of their hard expiry (the whole pool's index, or one upstream's), filtered, at
-- most `limit` of them, examining at most `budget` index entries. Its pair in Python:
-- activity/memory/inspection.py `Inspector.browse`.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (caller clock, ms)   ARGV[2] upstream ID ("": the whole pool)
-- ARGV[3] state   ARGV[4] protocol   ARGV[5] region   ARGV[6] carrier ("": any)
-- ARGV[7] cursor expiry ms ("": from the start)   ARGV[8] cursor proxy ID
-- ARGV[9] limit   ARGV[10] budget
-- Returns: {"ok": {"proxies": [[state, checked ms or null, extracted by or null, worker or
--          null, static JSON], ...], "next": [expiry ms, proxy ID] or null, "examined": n,
--          "partial": bool}}
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 10, 'browse: arity')
local now, u = tonum(ARGV[1]), ARGV[2]
local want = {s = ARGV[3], pr = ARGV[4], r = ARGV[5], c = ARGV[6]}
local after_ms, after_id = tonumber(ARGV[7]), ARGV[8]
local limit, budget = tonum(ARGV[9]), tonum(ARGV[10])
local key = u ~= '' and expiry_key(u) or EXP

-- Where to start: right after the cursor's entry while it is there; else (it left the index)
-- at its score, skipping the entries tied with it up to its ID (each counted as examined).
local start, skip_ties = 0, false
if after_ms then
  local rank = zread('ZRANK', key, after_id)
  local score = rank and zread('ZSCORE', key, after_id)
  if rank and tonum(score) == after_ms then
    start = rank + 1
  else
    start, skip_ties = zread('ZCOUNT', key, '-inf', '(' .. after_ms), true
  end
end
-- One more than the budget: whether the index goes on past what may be examined.
local entries = zread('ZRANGE', key, start, start + budget, 'WITHSCORES')
-- Whether a <= b in the index's order of ties: bytes (memcmp). Lua's own `<=` on strings uses
-- strcoll, and Redis sets LC_COLLATE from its environment: under en_US.UTF-8 it would not skip
-- the ties the index put before the cursor. Bounded by the IDs' length.
local function bytes_le(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a <= #b
end
local found, examined, last_id, last_score = {}, 0, nil, nil
local function matches(rec, state)
  return (want.s == '' or state == want.s) and (want.pr == '' or rec.pr == want.pr)
    and (want.r == '' or rec.r == want.r) and (want.c == '' or rec.c == want.c)
end
for i = 1, math.min(#entries, 2 * budget), 2 do
  local pid, score = entries[i], tonum(entries[i + 1])
  examined = examined + 1
  last_id, last_score = pid, score
  if not (skip_ties and score == after_ms and bytes_le(pid, after_id)) then
    local rec = get_rec(pid)
    if rec and rec.e > now then  -- past its hard expiry it is gone, swept or not
      local owner = get_owner(pid)
      local state = (owner and owner.d) and 'draining' or rec.s
      if matches(rec, state) then
        found[#found + 1] = cjson.encode({state, rec.ck or cjson.null, rec.x or cjson.null,
                                          owner and owner.w or cjson.null}):sub(1, -2)
          .. ',' .. hget(R, pid) .. ']'
        if #found == limit then break end
      end
    end
  end
end
local full = #found == limit
local more = #entries / 2 > examined  -- entries after the last one examined
local next_cursor = 'null'
if more and last_id then next_cursor = cjson.encode({last_score, last_id}) end
return '{"ok":{"proxies":[' .. table.concat(found, ',') .. '],"next":' .. next_cursor
  .. ',"examined":' .. examined .. ',"partial":' .. tostring(more and not full) .. '}}'
