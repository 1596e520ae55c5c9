-- status.lua: what the scheduler holds of one upstream and its account at `now`, read only (the
-- console's overview): its due time, its running fetch's lease end (if not ended), its request
-- (queued, or pending behind the running fetch), and the account's calls and proxies granted
-- in the last minute. Bounded: a score each, a ZCOUNT, and at most max_grants grants summed
-- (the log never holds more: take_proxies.lua).
-- KEYS[1]  <prefix>:{sched}:meta
-- ARGV[1]  account digest   ARGV[2] upstream ID   ARGV[3] now (ms)   ARGV[4] most grants read
-- Returns: {"ok": {due?, running?, requested?, calls, proxies}} (ms; absent: none)
-- Errors: none (a read; an unknown account or upstream has nothing to show)
assert(#ARGV == 4, 'status: arity')
local upstream, now, max_grants = ARGV[2], tonum(ARGV[3]), tonum(ARGV[4])
local reply = {}
local due = redis.call('ZSCORE', k('cadence'), upstream)
if due then reply.due = tonum(due) end
local running = redis.call('ZSCORE', k('running'), upstream)
if running and tonum(running) > now then reply.running = tonum(running) end
local requested = redis.call('ZSCORE', k('priority'), upstream)
  or redis.call('HGET', k('pending'), upstream)
if requested then reply.requested = tonum(requested) end
local after = '(' .. (now - 60000)
reply.calls = redis.call('ZCOUNT', k('calls'), after, '+inf')
local granted = 0
for _, grant in ipairs(redis.call('ZRANGEBYSCORE', k('proxies'), after, '+inf', 'LIMIT', 0,
                                  max_grants)) do
  granted = granted + tonum(string.match(grant, ':(%-?%d+)$'))  -- a give-back is negative
end
reply.proxies = granted
return ok(reply)
