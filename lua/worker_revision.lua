-- worker_revision.lua: a worker's holdings revision and its live session, read together: what
-- the control plane checks before it rebuilds the worker's snapshot. O(1): two reads, none of
-- the holdings themselves (worker_assignments.lua reads those, with the same revision).
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] worker ID
-- Returns: {"ok": {r: revision (0: never counted), s: session {sid, g, x, iss, ack} | null}}
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 1, 'worker_revision: arity')
local w = ARGV[1]
return ok({r = revision_of(w), s = live_session(w, server_ms()) or cjson.null})
