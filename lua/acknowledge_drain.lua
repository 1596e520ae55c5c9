-- acknowledge_drain.lua: ADR-005 AcknowledgeDrain: release only at zero counts behind an
-- ACKed excluding snapshot; the stored runtime is checked in the same step as the release.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] proxy ID  ARGV[2] worker ID  ARGV[3] epoch  ARGV[4] active  ARGV[5] reserved
-- Returns: {"ok": "released" | "waiting_counts" | "waiting_snapshot"}
-- Errors: ownership_conflict (not_found, not_owned, wrong_worker, wrong_epoch, not_draining)
assert(#KEYS == 1 and #ARGV == 5, 'acknowledge_drain: arity')
local pid, w, epoch = ARGV[1], ARGV[2], tonum(ARGV[3])
local active, reserved = tonum(ARGV[4]), tonum(ARGV[5])
local rec, owner, err = owner_checked(pid, w, epoch)
if err then return err end
if not owner.d then return fail('ownership_conflict', 'not_draining') end
if active > 0 or reserved > 0 then return ok('waiting_counts') end
local status = drain_status(pid, w, true, server_ms())
if status == 'released' then
  release(pid)
  finish_like_records()
end
return ok(status)
