-- worker_assignments.lua: what a worker's next snapshot is built from, read atomically with
-- the epoch it belongs to and the worker's holdings revision.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] worker ID  ARGV[2] limit  ARGV[3] offset (a page of the lease order; the caller
-- pages under the revision: a page whose revision moved means the pages are not one read)
-- Returns: {"ok": {epoch, assignments: [{id, w, e, l, d}], held: [{id, s, j}], complete,
--          revision}}
--          (held: each assignment's proxy, its hot state and its static JSON as stored)
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 3, 'worker_assignments: arity')
local w, limit, offset = ARGV[1], tonum(ARGV[2]), tonum(ARGV[3])
local key = worker_owned_key(w)
local items, held = {}, {}
for _, pid in ipairs(zread('ZRANGE', key, offset, offset + limit - 1)) do
  items[#items + 1] = owner_view(pid, get_owner(pid))
  local rec = get_rec(pid)
  if rec then held[#held + 1] = {id = pid, s = rec.s, j = hget(R, pid)} end
end
return ok({epoch = tonumber(redis.call('GET', EPOCH) or '0'), assignments = items,
           held = held, complete = zread('ZCARD', key) <= offset + limit,
           revision = revision_of(w)})
