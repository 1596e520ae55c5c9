-- issue_snapshot.lua: record a complete snapshot issued to the worker's session and bind the
-- pending drain tickets it excludes (ADR-005 "Drain Ticket 会绑定...").
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] worker ID  ARGV[2] session ID  ARGV[3] ref {v, e, c}  ARGV[4] JSON proxy IDs
-- ARGV[5] scan_budget
-- Returns: {"ok": tickets bound}
-- Errors: session_fenced, session_expired, snapshot_rejected (epoch_ahead, version_order,
--         includes_draining), scan_budget_exhausted
assert(#KEYS == 1 and #ARGV == 5, 'issue_snapshot: arity')
local w, sid = ARGV[1], ARGV[2]
local ref, included_list, budget = cjson.decode(ARGV[3]), cjson.decode(ARGV[4]), tonum(ARGV[5])
local s, err = session_for_write(w, sid, server_ms())
if err then return err end
if ref.e > tonumber(redis.call('GET', EPOCH) or '0') then
  return fail('snapshot_rejected', 'epoch_ahead')
end
local issued = s.iss
if issued and issued.v == ref.v and issued.e == ref.e and issued.c == ref.c then return ok(0) end
if issued and (ref.v <= issued.v or ref.e < issued.e) then
  return fail('snapshot_rejected', 'version_order')
end
local included = {}
for _, pid in ipairs(included_list) do
  included[pid] = true
  local ticket = get_json(TICKETS, pid)
  if ticket and ticket.w == w and ticket.re <= ref.e then
    return fail('snapshot_rejected', 'includes_draining')
  end
end
local pending_key = worker_draining_key(w)
if zread('ZCARD', pending_key) > budget then
  return fail('scan_budget_exhausted')
end
s.iss = ref
hset(SESS, w, cjson.encode(s))
local bound = 0
for _, pid in ipairs(zread('ZRANGE', pending_key, 0, -1)) do
  local ticket = get_json(TICKETS, pid)
  local fresh = ticket.sv == nil or ticket.g ~= s.g
  if fresh and ticket.re <= ref.e and not included[pid] then
    ticket.sv, ticket.se, ticket.sc, ticket.g = ref.v, ref.e, ref.c, s.g
    hset(TICKETS, pid, cjson.encode(ticket))
    bound = bound + 1
  end
end
return ok(bound)
