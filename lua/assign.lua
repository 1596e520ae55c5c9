-- assign.lua: ADR-005 Worker 所有权 Assign: AVAILABLE, unowned, before usable_until.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (the caller's `now`, ms)  ARGV[2] proxy ID  ARGV[3] worker ID  ARGV[4] ttl ms
-- ARGV[5] clean_budget   ARGV[6] the pool's clock (ms; cleaning never follows a caller's)
-- Returns: {"ok": {id, w, e, l, d}}
-- Errors: ownership_conflict (not_found, already_owned, not_available, past_usable)
assert(#KEYS == 1 and #ARGV == 6, 'assign: arity')
local now, pid, w, ttl = tonum(ARGV[1]), ARGV[2], ARGV[3], tonum(ARGV[4])
local pool_now = tonum(ARGV[6])
clean_expired(pool_now, tonum(ARGV[5]))
local rec = get_rec(pid)
if not rec or rec.e <= now then return fail('ownership_conflict', 'not_found') end
if hexists(OWN, pid) then return fail('ownership_conflict', 'already_owned') end
if rec.s ~= 'available' then return fail('ownership_conflict', 'not_available') end
if rec.uu <= now then return fail('ownership_conflict', 'past_usable') end
local epoch = redis.call('INCR', EPOCH)
touch(EPOCH)
local owner = {w = w, e = epoch, l = math.min(now + ttl, rec.uu), d = false}
local t = track_begin(pid, rec, nil)
set_lease(pid, owner, owner.l)
track_end(pid, t, rec.u, rec, owner)
finish(pool_now)
return ok(owner_view(pid, owner))
