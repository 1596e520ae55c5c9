-- take_call.lua: one more vendor API call for a current claim's fetch (a next page).
-- KEYS[1]  <prefix>:{sched}:meta
-- ARGV[1]  account digest   ARGV[2] upstream ID   ARGV[3] token   ARGV[4] now (ms)
-- ARGV[5]  calls per second (0: none)   ARGV[6] calls per minute (0: none)
-- Returns: {"ok": {}} taken; {"ok": {"retry_after": ms}} not taken
-- Errors: lease_lost: the token is not the upstream's current claim; nothing changed
assert(#ARGV == 6, 'take_call: arity')
local upstream, token, now = ARGV[2], ARGV[3], tonum(ARGV[4])
if not current(upstream, token, now) then return fail('lease_lost') end
local wait = call_wait(now, tonum(ARGV[5]), tonum(ARGV[6]))
if wait then return ok({retry_after = wait}) end
add_call(now)
return '{"ok":{}}'
