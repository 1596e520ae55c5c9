-- acknowledge_snapshot.lua: the worker ACKs the last snapshot issued to its session.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] worker ID  ARGV[2] session ID  ARGV[3] version
-- Returns: {"ok": session {sid, g, x, iss, ack}}
-- Errors: session_fenced, session_expired, snapshot_rejected (not_issued)
assert(#KEYS == 1 and #ARGV == 3, 'acknowledge_snapshot: arity')
local w, sid, version = ARGV[1], ARGV[2], tonum(ARGV[3])
local s, err = session_for_write(w, sid, server_ms())
if err then return err end
if not s.iss or s.iss.v ~= version then return fail('snapshot_rejected', 'not_issued') end
s.ack = s.iss
hset(SESS, w, cjson.encode(s))
return ok(s)
