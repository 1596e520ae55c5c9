-- finish.lua: a current claim's fetch is done (seed 001's 收尾): its place freed, the upstream
-- due at the next time, or served first if it was requested while the fetch ran.
-- KEYS[1]  <prefix>:{sched}:meta
-- ARGV[1]  account digest   ARGV[2] upstream ID   ARGV[3] token   ARGV[4] now (ms)
-- ARGV[5]  next due (ms)
-- Returns: {"ok": true}
-- Errors: lease_lost: the token is not the upstream's current claim (a redelivered task, a
--         lease that ended); nothing changed
assert(#ARGV == 5, 'finish: arity')
local upstream, token, now, next_due = ARGV[2], ARGV[3], tonum(ARGV[4]), tonum(ARGV[5])
if not current(upstream, token, now) then return fail('lease_lost') end
redis.call('ZREM', k('running'), upstream)
redis.call('HDEL', k('claims'), upstream)
if redis.call('ZSCORE', k('cadence'), upstream) then  -- not forgotten meanwhile
  redis.call('ZADD', k('cadence'), next_due, upstream)
  local requested = redis.call('HGET', k('pending'), upstream)
  if requested then
    redis.call('ZADD', k('priority'), 'NX', requested, upstream)
    redis.call('HDEL', k('pending'), upstream)
  end
end
return ok(true)
