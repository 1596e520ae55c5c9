-- sweep.lua: ADR-005 "短 TTL 清理" layer 3, plus expired worker sessions and reports, and
-- ended quarantines of banned exits.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (caller clock, ms)   ARGV[2] limit
-- Returns: {"ok": {expired, sessions, quarantines, more, tally}}: tally is every record removed
--          at its expiry since the last sweep, wherever it was cleaned, as
--          {"<upstream>|used": n, "<upstream>|unused": n} (taken: the next sweep starts at 0)
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 2, 'sweep: arity')
local now, limit = tonum(ARGV[1]), tonum(ARGV[2])
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
return ok({expired = expired, sessions = #ended, quarantines = quarantines,
           more = more_records or more_sessions or more_quarantines, tally = tally})
