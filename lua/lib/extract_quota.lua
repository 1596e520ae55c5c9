-- lib/extract_quota.lua: the client quota that extract and charge_call take (extract's own
-- selection, ADR-005's seven steps, is in lua/extract.lua).

-- CallQuota counters (activity/_quota.py is the same arithmetic; read the reasoning there).
-- One hash per client, limit and window: w (the window index c counts in), c (its units), p
-- (the previous window's). The client ID comes last in the key name, so that no two clients,
-- limits or windows share one. A counter lives until two windows after the one it counts in,
-- plus QUOTA_SLACK_MS: it is read on the caller's clock but expired on the server's, which may
-- differ a little. Counters are written at once (redis.call), not through the write buffer.
local QUOTA_SLACK_MS = 60000
-- How long extract's "this call's unit is charged" marker lives (`quota-charged:<nonce>`, left
-- only by a retry-safe call that stored no result): its own retry follows within the call's
-- socket timeouts.
local QUOTA_RETRY_MARK_MS = 10000
local QUOTA_WINDOW = {calls = 'call_window', proxies = 'proxy_window'}

-- Adds `units` to a counter `quota_take` read (and found room in) during this call.
local function quota_add(counter, units, now)
  local window, idx = counter.window, counter.idx
  redis.call('HSET', counter.key, 'w', string.format('%d', idx), 'c', counter.c + units,
    'p', counter.p)
  -- Two windows from the one counted in (later than now when the clock went back).
  redis.call('PEXPIRE', counter.key, string.format('%d', (idx + 2) * window - now + QUOTA_SLACK_MS))
end

-- Takes `cost` units of the client's `limit` ('calls' or 'proxies') at `now`, or with `dry`
-- only checks that they fit. Returns nil and the counter as read (for a later `quota_add` in
-- the same call), or the quota_exceeded reply (nothing written).
local function quota_take(client, quota, limit, now, cost, dry)
  local units, window = quota[limit], quota[QUOTA_WINDOW[limit]]
  local key = k(string.format('quota:%s:%d:%d:', limit, units, window) .. client)
  local idx = math.floor(now / window)
  local got = redis.call('HMGET', key, 'w', 'c', 'p')
  local w, c, p = tonumber(got[1]), 0, 0
  if w ~= nil and w >= idx - 1 then
    if w == idx - 1 then
      p = tonumber(got[2]) or 0
    else
      c, p = tonumber(got[2]) or 0, tonumber(got[3]) or 0
      idx = math.max(idx, w) -- the clock went back: keep the newest window
    end
  end
  local elapsed = now - idx * window
  local behind = math.max(0, -elapsed) -- until the newest window seen starts (clock went back)
  elapsed = math.max(0, elapsed)
  local count = math.floor(p * (window - elapsed) / window) + c
  if count + cost <= units then
    local counter = {key = key, window = window, idx = idx, c = c, p = p}
    if not dry then quota_add(counter, cost, now) end
    return nil, counter
  end
  local room = units - cost
  local wait = 0
  if room < 0 then
    wait = 2 * window
  elseif c > room then
    wait = behind + (window - elapsed) + math.floor(window * (c - room - 1) / c) + 1
  elseif p > 0 then
    wait = behind + math.floor(window * (p - room + c - 1) / p) + 1 - elapsed
  end
  return fail('quota_exceeded', limit, {retry_after_ms = wait, left = math.max(0, units - count)})
end
