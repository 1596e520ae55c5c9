-- claim.lua: the account's next fetch as a lease (seed 001's 领取): fetches whose lease ended
-- given up first; then the first requested upstream (by request time, then ID), else the one
-- due longest (due <= now; by due time, then ID); a free place under the concurrency; room for
-- one vendor API call in every window, which the claim takes. A running upstream is never in
-- the priority queue (request.lua marks it pending instead) and never due in the cadence by
-- this clock (its score is its lease end, > now, or the lease was given up above), so it is
-- never claimed twice at once by this clock; dispatchers' clocks must agree to well within a
-- lease, since a lease ended by one clock is given up by a claim on that clock.
-- KEYS[1]  <prefix>:{sched}:meta
-- ARGV[1]  account digest   ARGV[2] now (caller clock, ms)   ARGV[3] lease (ms)
-- ARGV[4]  concurrency   ARGV[5] calls per second (0: none)   ARGV[6] calls per minute (0: none)
-- ARGV[7]  the claim's token (made by the caller)
-- Returns: {"ok": {"upstream", "lease_ends", "requested"}} claimed;
--          {"ok": {"refused": nothing_due|concurrency|calls, "retry_after"}} (ms, absent
--          when unknown): nothing taken
-- Errors: none
assert(#ARGV == 7, 'claim: arity')
local now, lease, concurrency = tonum(ARGV[2]), tonum(ARGV[3]), tonum(ARGV[4])
local per_second, per_minute, token = tonum(ARGV[5]), tonum(ARGV[6]), ARGV[7]
clean(now)
local candidate, requested = nil, false
local first = redis.call('ZRANGE', k('priority'), 0, 0)
if first[1] then
  candidate, requested = first[1], true
else
  local due = redis.call('ZRANGE', k('cadence'), 0, 0, 'WITHSCORES')
  if not due[1] then return ok({refused = 'nothing_due'}) end
  if tonum(due[2]) > now then
    return ok({refused = 'nothing_due', retry_after = tonum(due[2]) - now})
  end
  candidate = due[1]
end
if redis.call('ZCARD', k('running')) >= concurrency then
  local first_end = redis.call('ZRANGE', k('running'), 0, 0, 'WITHSCORES')
  return ok({refused = 'concurrency', retry_after = tonum(first_end[2]) - now})
end
local wait = call_wait(now, per_second, per_minute)
if wait then return ok({refused = 'calls', retry_after = wait}) end
local ends = now + lease
add_call(now)
redis.call('ZADD', k('running'), ends, candidate)
redis.call('HSET', k('claims'), candidate, token)
redis.call('ZREM', k('priority'), candidate)
redis.call('ZADD', k('cadence'), 'XX', ends, candidate)  -- due again if the lease ends unfinished
-- A request made while a lost fetch ran is served by this claim, not after it.
if redis.call('HDEL', k('pending'), candidate) == 1 then requested = true end
return ok({upstream = candidate, lease_ends = ends, requested = requested})
