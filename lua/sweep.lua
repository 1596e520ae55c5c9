-- sweep.lua: ADR-005 "短 TTL 清理" layer 3, plus expired worker sessions and reports, and
-- ended quarantines of banned exits.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (caller clock, ms)   ARGV[2] limit
-- Returns: {"ok": {expired, sessions, quarantines, more}}
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 2, 'sweep: arity')
local now, limit = tonum(ARGV[1]), tonum(ARGV[2])
local expired, more_records = clean_expired(now, limit)
local snow = server_ms()
for _, w in ipairs(zread('ZRANGEBYSCORE', RT_EXP, '-inf', snow, 'LIMIT', 0, limit)) do
  hdel(RT, w)
  zrem(RT_EXP, w)
end
local due = zread('ZRANGEBYSCORE', SESS_EXP, '-inf', snow, 'LIMIT', 0, limit + 1)
local sessions = math.min(#due, limit)
for i = 1, sessions do
  zrem(SESS_EXP, due[i])
  hdel(SESS, due[i])
  hdel(RT, due[i])
  zrem(RT_EXP, due[i])
end
local quarantines, more_quarantines = clean_quarantines(now, limit)
return ok({expired = expired, sessions = sessions, quarantines = quarantines,
           more = more_records or #due > limit or more_quarantines})
