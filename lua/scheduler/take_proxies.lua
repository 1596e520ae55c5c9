-- take_proxies.lua: how many of the proxies a current claim's fetch wants it may ask its vendor
-- for, under the account's proxies per minute (a grant at t counts while t > now - 60 s); the
-- grant counts at once. The log holds at most max_grants grants of the last minute (the loop
-- below reads that many at most); a take past it is granted nothing (fails closed).
-- KEYS[1]  <prefix>:{sched}:meta
-- ARGV[1]  account digest   ARGV[2] upstream ID   ARGV[3] token   ARGV[4] now (ms)
-- ARGV[5]  proxies per minute (0: none)   ARGV[6] wanted   ARGV[7] most grants kept
-- Returns: {"ok": granted}
-- Errors: lease_lost: the token is not the upstream's current claim; nothing changed
assert(#ARGV == 7, 'take_proxies: arity')
local upstream, token, now = ARGV[2], ARGV[3], tonum(ARGV[4])
local most, wanted, max_grants = tonum(ARGV[5]), tonum(ARGV[6]), tonum(ARGV[7])
if not current(upstream, token, now) then return fail('lease_lost') end
redis.call('ZREMRANGEBYSCORE', k('proxies'), '-inf', now - 60000)
local held = redis.call('ZCARD', k('proxies'))
if held == 0 then redis.call('DEL', k('pseq')) end
if held >= max_grants then return ok(0) end
local granted = wanted
if most > 0 then
  local used = 0
  for _, grant in ipairs(redis.call('ZRANGEBYSCORE', k('proxies'), '(' .. (now - 60000), '+inf')) do
    used = used + tonum(string.match(grant, ':(%-?%d+)$'))  -- a give-back is negative
  end
  granted = math.max(0, math.min(wanted, most - math.max(0, used)))
end
if granted > 0 then
  local n = redis.call('INCR', k('pseq'))
  redis.call('ZADD', k('proxies'), now, now .. ':' .. n .. ':' .. granted)
end
return ok(granted)
