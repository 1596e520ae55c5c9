-- lib/replies.lua: what an operation answers, now and to a retry.
--
-- Replies: every operation returns one JSON string, {"ok": ...} or {"err": code, "reason": ...};
-- the codes are activity/errors.py's table, the reasons its *_REASONS tuples (no free text:
-- MemoryPool must give the same answer). A Lua error (assert) is a programming error.

local function ok(value) return cjson.encode({ok = value}) end
local function fail(code, reason, extra)
  local reply = extra or {}
  reply.err, reply.reason = code, reason
  return cjson.encode(reply)
end

-- Stored results (idempotency, operation IDs). The key's own TTL frees memory; the stored
-- expiry `x` keeps replay time on the caller's clock, like every other proxy time.
-- Stored as "digest|expires|nonce|<result JSON>". Returns the result JSON and whether it is a
-- replay to the caller (not when the stored call is this very call, `nonce`: our own retry
-- after a lost reply is the first answer the caller sees); nil when there is none; false when
-- the request digest differs.
local function replay(key, request_digest, now, nonce)
  local stored = redis.call('GET', key)
  if not stored then return nil end
  local d, x, n, result = string.match(stored, '^([^|]*)|(%d+)|([^|]*)|(.*)$')
  if tonumber(x) <= now then return nil end
  if d ~= request_digest then return false end
  return result, n ~= nonce
end

local function remember(key, request_digest, result_json, expires, now, nonce)
  redis.call('SET', key, table.concat({request_digest, string.format('%d', expires), nonce,
             result_json}, '|'), 'PX', expires - now)
end
