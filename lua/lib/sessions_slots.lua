-- lib/sessions_slots.lua: worker sessions, snapshots and runtime reports (open_session,
-- issue_snapshot, acknowledge_snapshot, write_report, read_runtime) and the slots view built
-- on them (upstream_inventory; extractable counts with `count_above` alone). Sessions and
-- runtime live on the server's clock (ADR rule 5).

local function count_above(key, threshold) return zread('ZCOUNT', key, '(' .. threshold, '+inf') end
local function range_above(key, threshold, limit)
  return zread('ZRANGEBYSCORE', key, '(' .. threshold, '+inf', 'LIMIT', 0, limit)
end

-- Worker sessions and runtime live on the server's clock (ADR rule 5).
local function live_session(w, snow)
  local s = get_json(SESS, w)
  if s and s.x > snow then return s end
  return nil
end

local function fresh_runtime(w, snow)
  local s = live_session(w, snow)
  local rt = get_json(RT, w)
  if not s or not rt or rt.sid ~= s.sid or rt.x <= snow then return nil end
  return rt
end

-- Returns the session or nil plus an error reply.
local function session_for_write(w, sid, snow)
  local s = get_json(SESS, w)
  if not s or s.sid ~= sid then
    return nil, fail('session_fenced')
  end
  if s.x <= snow then return nil, fail('session_expired') end
  return s, nil
end
