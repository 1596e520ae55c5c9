-- worker_sessions.lua: live worker sessions for the console (port PoolInspector), read only,
-- the soonest to expire first: each with its runtime report while fresh and the sizes of the
-- worker's held and draining sets. Bounded: at most `limit` sessions (one more is read to know
-- whether more are live). Its pair in Python: activity/memory/inspection.py
-- `Inspector.worker_sessions`.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] limit
-- Returns: {"ok": {"workers": [{w, s: session, rt: runtime or null, owned, draining}],
--          "complete": bool}}
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 1, 'worker_sessions: arity')
local limit = tonum(ARGV[1])
local snow = server_ms()
local live = zread('ZRANGEBYSCORE', SESS_EXP, '(' .. snow, '+inf', 'LIMIT', 0, limit + 1)
local workers = {}
for i = 1, math.min(#live, limit) do
  local w = live[i]
  local s = get_json(SESS, w)
  if s then
    workers[#workers + 1] = {w = w, s = s, rt = fresh_runtime(w, snow) or cjson.null,
                             owned = zread('ZCARD', worker_owned_key(w)),
                             draining = zread('ZCARD', worker_draining_key(w))}
  end
end
return ok({workers = workers, complete = #live <= limit})
