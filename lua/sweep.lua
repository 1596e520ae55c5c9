-- sweep.lua: ADR-005 "短 TTL 清理" layer 3, plus expired worker sessions and reports, and
-- ended quarantines of banned exits.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (caller clock, ms)   ARGV[2] limit
-- ARGV[3] this call's result key suffix ("op:<digest>")   ARGV[4] its nonce
-- Returns: {"ok": {expired, sessions, quarantines, more, tally}}: tally is every record removed
--          at its expiry since the last sweep, wherever it was cleaned, as
--          {"<upstream>|used": n, "<upstream>|unused": n} (taken: the next sweep starts at 0).
--          The result is kept for REPLAY_MS under the call's own key, so the caller's retry
--          after a lost reply gets the tally this call took instead of losing it.
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 4, 'sweep: arity')
local now, limit = tonum(ARGV[1]), tonum(ARGV[2])
local result_key, nonce = k(ARGV[3]), ARGV[4]
-- Long enough for the immediate retry of a dropped connection; short, as a sweep runs often
-- (one small key per sweep lives this long).
local REPLAY_MS = 60000
local stored = replay(result_key, 'sweep', now, nonce)
if stored then return ok(cjson.decode(stored)) end
local expired, more_records = clean_expired(now, limit)
local snow = server_ms()
for _, w in ipairs(zread('ZRANGEBYSCORE', RT_EXP, '-inf', snow, 'LIMIT', 0, limit)) do
  hdel(RT, w)
  zrem(RT_EXP, w)
end
local ended, more_sessions = due_members(SESS_EXP, snow, limit)
for _, w in ipairs(ended) do
  zrem(SESS_EXP, w)
  hdel(SESS, w)
  hdel(RT, w)
  zrem(RT_EXP, w)
end
local quarantines, more_quarantines = clean_quarantines(now, limit)
local tally = take_counts(EXPIRED_COUNTS)  -- cjson encodes an empty one as {}
local result = {expired = expired, sessions = #ended, quarantines = quarantines,
                more = more_records or more_sessions or more_quarantines, tally = tally}
remember(result_key, 'sweep', cjson.encode(result), now + REPLAY_MS, now, nonce)
return ok(result)
