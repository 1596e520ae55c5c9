-- give_back_proxies.lua: proxies a current claim's fetch was granted (take_proxies.lua) and did
-- not get back from its vendor, returned: logged as a negative grant, so they count no more.
-- The caller returns at most what it was granted.
-- KEYS[1]  <prefix>:{sched}:meta
-- ARGV[1]  account digest   ARGV[2] upstream ID   ARGV[3] token   ARGV[4] now (ms)
-- ARGV[5]  count   ARGV[6] when it was granted (ms, <= now): logged then, so it leaves the
--          window with its grant; nothing when that grant has left it already
-- Returns: {"ok": true}
-- Errors: lease_lost: the token is not the upstream's current claim; nothing changed
assert(#ARGV == 6, 'give_back_proxies: arity')
local upstream, token, now, count = ARGV[2], ARGV[3], tonum(ARGV[4]), tonum(ARGV[5])
local taken = tonum(ARGV[6])
if not current(upstream, token, now) then return fail('lease_lost') end
if count > 0 and taken > now - 60000 then
  local n = redis.call('INCR', k('pseq'))
  redis.call('ZADD', k('proxies'), taken, taken .. ':' .. n .. ':-' .. count)
end
return ok(true)
