-- begin_drain.lua: ADR-005 BeginDrain: the first call writes a per-worker ticket and bumps the
-- global epoch; repeats for the same assignment return it unchanged.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] proxy ID  ARGV[2] worker ID  ARGV[3] epoch
-- Returns: {"ok": {id, w, e, l, d}}
-- Errors: ownership_conflict (not_found, not_owned, wrong_worker, wrong_epoch)
assert(#KEYS == 1 and #ARGV == 3, 'begin_drain: arity')
local pid, w, epoch = ARGV[1], ARGV[2], tonum(ARGV[3])
local rec, owner, err = owner_checked(pid, w, epoch)
if err then return err end
if owner.d then return ok(owner_view(pid, owner)) end
local required = redis.call('INCR', EPOCH)
local t = track_begin(pid, rec, owner)
owner.d = true
hset(OWN, pid, cjson.encode(owner))
zrem(worker_owned_key(w), pid)
bump_revision(w)
track_end(pid, t, rec.u, rec, owner)
-- at: when the drain began (server clock), for the console's ticket age
hset(TICKETS, pid, cjson.encode({w = w, ae = owner.e, re = required, at = server_ms()}))
local key = worker_draining_key(w)
zadd(key, required, pid)
touch(TICKETS); touch(key); touch(EPOCH)
finish_like_records()
return ok(owner_view(pid, owner))
