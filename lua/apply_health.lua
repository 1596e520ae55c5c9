-- apply_health.lua: ADR-005 "健康状态": state, check time, success time, latency, failure.
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (caller clock, ms)   ARGV[2] clean_budget
-- ARGV[3] JSON array of [proxy ID, state, checked_at ms, latency ms|null, reason|null,
--         expected state|null (apply only to a proxy in it, else ignored)]
-- Returns: {"ok": {applied, missing, ignored, stale}}
-- Errors: layout_mismatch
assert(#KEYS == 1 and #ARGV == 3, 'apply_health: arity')
local now, clean_budget = tonum(ARGV[1]), tonum(ARGV[2])
local updates = cjson.decode(ARGV[3])
clean_expired(now, clean_budget)
local result = {applied = 0, missing = 0, ignored = 0, stale = 0}
local ids = {}
for i, upd in ipairs(updates) do ids[i] = upd[1] end
prefetch(HOT, ids); prefetch(OWN, ids); prefetch(HEALTH, ids)
for _, upd in ipairs(updates) do
  local pid, state, checked, latency, reason = upd[1], upd[2], upd[3], upd[4], upd[5]
  local expected = upd[6]
  local rec = get_rec(pid)
  if not rec or rec.e <= now then
    result.missing = result.missing + 1
  elseif TERMINAL[rec.s] or (expected ~= cjson.null and expected ~= rec.s) then
    result.ignored = result.ignored + 1
  elseif rec.ck and checked < rec.ck then
    result.stale = result.stale + 1 -- out-of-order checker results never win
  else
    local owner = get_owner(pid)
    local t = track_begin(pid, rec, owner)
    rec.s, rec.ck = state, checked
    put_rec(pid, rec)
    -- Last success, latency, failure: for operators; no operation reads them.
    local old = hget(HEALTH, pid) or '||'
    local success, _, failure = string.match(old, '^(%d*)|(%d*)|(.*)$')
    if state == 'available' then
      success, failure = string.format('%d', checked), ''
    elseif reason ~= cjson.null then
      failure = reason
    end
    local lat = latency == cjson.null and '' or string.format('%d', latency)
    hset(HEALTH, pid, table.concat({success, lat, failure}, '|'))
    track_end(pid, t, rec.u, rec, owner)
    result.applied = result.applied + 1
  end
end
touch(HEALTH)
finish(now)
return ok(result)
