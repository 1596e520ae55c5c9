-- request.lua: a fetch of the upstream ahead of its cadence (seed 001's 请求检查): requests
-- within the cooldown of the last accepted one are merged into it.
-- KEYS[1]  <prefix>:{sched}:meta
-- ARGV[1]  account digest   ARGV[2] upstream ID   ARGV[3] now (ms)   ARGV[4] cooldown (ms)
-- Returns: {"ok": "accepted" | "merged" | "unknown"} (unknown: not scheduled, nothing changed)
-- Errors: none
assert(#ARGV == 4, 'request: arity')
local upstream, now, cooldown = ARGV[2], tonum(ARGV[3]), tonum(ARGV[4])
if not redis.call('ZSCORE', k('cadence'), upstream) then return ok('unknown') end
local last = redis.call('HGET', k('requests'), upstream)
if last and now < tonum(last) + cooldown then return ok('merged') end
redis.call('HSET', k('requests'), upstream, now)
-- Any running entry, its lease ended by this clock or not: only a claim gives a lease up, so
-- a dispatcher whose clock is behind never finds it queued and running.
if redis.call('ZSCORE', k('running'), upstream) then
  redis.call('HSETNX', k('pending'), upstream, now)  -- served right after the running fetch
else
  redis.call('ZADD', k('priority'), 'NX', now, upstream)
end
return ok('accepted')
