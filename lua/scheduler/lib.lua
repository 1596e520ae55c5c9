-- scheduler/lib.lua: key names, replies and the shared rules of the fetch scheduler's function
-- library (activity/scheduler/redis.py joins this file and every operation file here, each
-- wrapped as one registered function, into one library, as the pool's is built). Only
-- declarations at the top level: Redis runs a library's top level without `redis.call`.
--
-- Keys: KEYS[1] is `<prefix>:{sched}:meta`; ARGV[1] of every operation is the account's key
-- digest, and `bind` names the account's keys from both, all under the `{sched}` hash tag:
--   <prefix>:{sched}:acct:<digest>:cadence   ZSET upstream -> due ms
--   <prefix>:{sched}:acct:<digest>:priority  ZSET upstream -> request ms (requested, no running
--                                             entry: a request while one exists marks it pending)
--   <prefix>:{sched}:acct:<digest>:running   ZSET upstream -> lease end ms (fetches running)
--   <prefix>:{sched}:acct:<digest>:claims    HASH upstream -> claim token of its running fetch
--   <prefix>:{sched}:acct:<digest>:requests  HASH upstream -> last accepted request ms
--   <prefix>:{sched}:acct:<digest>:pending   HASH upstream -> request ms (requested while running)
--   <prefix>:{sched}:acct:<digest>:calls     ZSET "<ms>:<n>" -> ms (vendor API calls, last minute,
--                                             the newest 6,000 at most)
--   <prefix>:{sched}:acct:<digest>:seq       STRING n of the last call (deleted when a check finds
--                                             the log empty)
--   <prefix>:{sched}:acct:<digest>:proxies   ZSET "<ms>:<n>:<count>" -> ms (proxies granted, last
--                                             minute, 6,000 grants at most: take_proxies.lua)
--   <prefix>:{sched}:acct:<digest>:pseq      STRING n of the last grant (deleted with the log)
-- Unlike the pool's library, there is no write buffer: each operation touches a few members.
--
-- Every instant is the caller's `now` (ARGV, ms), never the server's clock: the rules are
-- activity/scheduler/memory.py's to the millisecond (the contract runs on both).
-- Replies: one JSON string, {"ok": ...} or {"err": code}; codes from activity/errors.py.

local NS
local function bind(meta, digest)
  assert(string.sub(meta, -5) == ':meta', 'scheduler: KEYS[1] must be the meta key')
  NS = string.sub(meta, 1, -5) .. 'acct:' .. digest .. ':'
end
local function k(name) return NS .. name end
local function ok(value) return cjson.encode({ok = value}) end
local function fail(code, reason) return cjson.encode({err = code, reason = reason}) end
local function tonum(s) return assert(tonumber(s), 'scheduler: a number expected') end

-- Gives up every fetch whose lease ended (its end <= now): its place is free and its upstream,
-- whose cadence score is that end, is due again. At most 128 at once; an account never runs
-- more than MAX_CONCURRENCY (64) fetches, so one call cleans them all.
local function clean(now)
  local ended = redis.call('ZRANGEBYSCORE', k('running'), '-inf', now, 'LIMIT', 0, 128)
  if #ended > 0 then
    redis.call('ZREM', k('running'), unpack(ended))
    redis.call('HDEL', k('claims'), unpack(ended))
  end
end

-- The lease end of the upstream's running fetch if `token` is its claim and the lease has not
-- ended (end > now), else nil.
local function current(upstream, token, now)
  if redis.call('HGET', k('claims'), upstream) ~= token then return nil end
  local ends = redis.call('ZSCORE', k('running'), upstream)
  if ends and tonum(ends) > now then return tonum(ends) end
  return nil
end

-- Milliseconds until one more vendor API call fits every window, or nil if it fits now. A call
-- at t counts in a window of length w while t > now - w; the log keeps the last minute only
-- (and the newest MAX_CALLS_PER_MINUTE calls of it at most: add_call).
local function call_wait(now, per_second, per_minute)
  redis.call('ZREMRANGEBYSCORE', k('calls'), '-inf', now - 60000)
  if redis.call('ZCARD', k('calls')) == 0 then redis.call('DEL', k('seq')) end
  local wait = nil
  for _, window in ipairs({{1000, per_second}, {60000, per_minute}}) do
    local length, most = window[1], window[2]
    if most > 0 then
      local after = '(' .. (now - length)
      local inside = redis.call('ZCOUNT', k('calls'), after, '+inf')
      if inside >= most then  -- the call whose leaving leaves most - 1 inside
        local oldest = redis.call('ZRANGEBYSCORE', k('calls'), after, '+inf', 'WITHSCORES',
                                  'LIMIT', inside - most, 1)
        local leaves = tonum(oldest[2]) + length
        if wait == nil or leaves - now > wait then wait = leaves - now end
      end
    end
  end
  return wait
end

-- Logs a call; only the newest MAX_CALLS_PER_MINUTE (6,000) are kept, which is all any window
-- can need (a limit is at most that, and the answer depends on the newest `most` calls inside
-- a window only), also when the account has no limit.
local MAX_CALLS = 6000
local function add_call(now)
  local n = redis.call('INCR', k('seq'))
  redis.call('ZADD', k('calls'), now, now .. ':' .. n)
  redis.call('ZREMRANGEBYRANK', k('calls'), 0, -(MAX_CALLS + 1))
end
