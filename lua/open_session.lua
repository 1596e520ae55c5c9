-- open_session.lua: ADR-005 worker runtime rule 1: the live session's ID renews it; any other
-- ID (or the same one after expiry) starts a new generation, fencing the old instance.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] worker ID  ARGV[2] session ID  ARGV[3] ttl ms (server clock)
-- ARGV[4] the server's replication ID as the connection learned it ("" unknown; or confirmed,
--         "<replid>!<promoted>"): a worker's heartbeat is how a pool that only serves gateways
--         learns of a failover (check_history in lua/lib/core.lua ends every session then)
-- Returns: {"ok": session {sid, g, x, iss, ack}}
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 4, 'open_session: arity')
local w, sid, ttl = ARGV[1], ARGV[2], tonum(ARGV[3])
local unconfirmed = check_history(ARGV[4])
if unconfirmed then return unconfirmed end
local snow = server_ms()
local s = live_session(w, snow)
if s and s.sid == sid then
  s.x = snow + ttl -- heartbeat of the current instance
else
  s = {sid = sid, g = redis.call('INCR', GEN), x = snow + ttl, seq = 0}
  hdel(RT, w)
  zrem(RT_EXP, w)
end
hset(SESS, w, cjson.encode(s))
zadd(SESS_EXP, s.x, w)
-- The epoch and generation counters, and the worker's holdings revision, must outlive every
-- session that holds values of them (created here if need be, so there is a key to extend):
-- a revision that restarted under a live session could repeat one the control plane has
-- already answered for other holdings.
local revision = worker_revision_key(w)
redis.call('SET', EPOCH, 0, 'NX')
redis.call('SET', revision, 0, 'NX')
for _, key in ipairs({SESS, SESS_EXP, GEN, EPOCH, RT, RT_EXP, revision}) do
  extend(key, ttl + GRACE_MS)
end
return ok(s)
