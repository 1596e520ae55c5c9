-- Per-client rate limits of the extract API (pool_admin/api/ratelimit.py explains the rules).
--
-- One sliding window counter per limit and client, in one hash:
--   w = index of the window the counts belong to (floor(now / window)),
--   c = units taken in window w, p = units taken in window w - 1.
-- The count at time now is floor(p * (window - elapsed) / window) + c, where elapsed is how far
-- now is into its window: the previous window's units decay linearly as the current one runs.
-- A take of `cost` units succeeds when count + cost <= limit.
--
-- "take": KEYS[1] requests-per-second hash, KEYS[2] proxies-per-minute hash
--   ARGV: "take", now_ms (negative: the server's clock), rps limit, rps window ms,
--         ppm limit, ppm window ms, count
--   Takes one request; then, if count > 0, count proxies. Nothing is taken past a refusal
--   except that the request stays taken when the proxies are refused (every call counts).
--   Reply: {0, window index of the proxies taken (-1 when count is 0)}
--        | {1 (requests refused) or 2 (proxies refused), ms until it would fit, units left}
-- "refund": KEYS[1] proxies-per-minute hash
--   ARGV: "refund", now_ms (as for take), window ms, window index from the take, units
--   Gives back units in the window they were taken from, as long as it still counts.
--   Reply: 1 when given back, 0 when that window no longer counts (nothing to give back).

local op = ARGV[1]
local now = tonumber(ARGV[2])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

if op == 'refund' then
  local taken = tonumber(ARGV[4])
  local units = tonumber(ARGV[5])
  if math.floor(now / tonumber(ARGV[3])) > taken + 1 then
    return 0
  end
  local got = redis.call('HMGET', KEYS[1], 'w', 'c', 'p')
  local w = tonumber(got[1])
  if w == taken then
    redis.call('HSET', KEYS[1], 'c', math.max(0, (tonumber(got[2]) or 0) - units))
    return 1
  elseif w == taken + 1 then
    redis.call('HSET', KEYS[1], 'p', math.max(0, (tonumber(got[3]) or 0) - units))
    return 1
  end
  return 0
end

-- Returns the window index taken from, or nil, ms until `cost` fits, units left.
local function take(key, limit, window, cost)
  local idx = math.floor(now / window)
  local got = redis.call('HMGET', key, 'w', 'c', 'p')
  local w, c, p = tonumber(got[1]), tonumber(got[2]) or 0, tonumber(got[3]) or 0
  if w == nil or w < idx - 1 then
    c, p = 0, 0
  elseif w == idx - 1 then
    c, p = 0, c
  elseif w > idx then
    idx = w -- the clock went back: keep counting in the newest window seen
  end
  local elapsed = math.max(0, now - idx * window)
  local count = math.floor(p * (window - elapsed) / window) + c
  if count + cost <= limit then
    redis.call('HSET', key, 'w', idx, 'c', c + cost, 'p', p)
    redis.call('PEXPIRE', key, 2 * window)
    return idx
  end
  -- The count must fall to room: floor(share) <= r means share < r + 1, reached 1 ms after
  -- the share equals r + 1 (a share of n units decays over the window as n * (1 - t/window)).
  local room = limit - cost
  local wait = 0
  if room < 0 then
    wait = 2 * window -- never fits
  elseif c > room then
    -- This window alone is over: it must become the previous one, then decay far enough.
    wait = (window - elapsed) + window * (1 - (room + 1) / c) + 1
  elseif p > 0 then
    -- Only the previous window's share decays (in this window: room - c + 1 >= 1).
    wait = window * (1 - (room - c + 1) / p) - elapsed + 1
  end
  return nil, math.ceil(math.max(0, wait)), math.max(0, limit - count)
end

local idx, wait, left = take(KEYS[1], tonumber(ARGV[3]), tonumber(ARGV[4]), 1)
if idx == nil then
  return {1, wait, left}
end
local count = tonumber(ARGV[7])
if count <= 0 then
  return {0, -1}
end
idx, wait, left = take(KEYS[2], tonumber(ARGV[5]), tonumber(ARGV[6]), count)
if idx == nil then
  return {2, wait, left}
end
return {0, idx}
