-- renew.lua: ADR-005 Renew: matches worker and epoch; the lease is capped at usable_until.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now ms  ARGV[2] proxy ID  ARGV[3] worker ID  ARGV[4] epoch  ARGV[5] ttl ms
-- Returns: {"ok": {id, w, e, l, d}}
-- Errors: ownership_conflict (not_found, not_owned, wrong_worker, wrong_epoch, draining,
--         lease_expired, past_usable)
assert(#KEYS == 1 and #ARGV == 5, 'renew: arity')
local now, pid, w, epoch, ttl = tonum(ARGV[1]), ARGV[2], ARGV[3], tonum(ARGV[4]), tonum(ARGV[5])
local rec, owner, err = owner_checked(pid, w, epoch)
if err then return err end
if owner.d then return fail('ownership_conflict', 'draining') end
if owner.l <= now then return fail('ownership_conflict', 'lease_expired') end
if rec.uu <= now then return fail('ownership_conflict', 'past_usable') end
set_lease(pid, owner, math.min(now + ttl, rec.uu))
finish(now)
return ok(owner_view(pid, owner))
