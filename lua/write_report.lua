-- write_report.lua: ADR-005 worker runtime rules 2-6, and the release of drained proxies in
-- the same atomic step as the runtime replacement (no read-then-release race).
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] JSON report {w, sid, seq, sv, ep, en: [[proxy ID, epoch, active, reserved, draining]]}
-- ARGV[2] body digest  ARGV[3] report TTL ms (server clock)  ARGV[4] scan_budget
-- Returns: {"ok": {replayed, released: [proxy IDs]}}
-- Errors: session_fenced, session_expired, report_rejected (sequence_conflict,
--         sequence_regression, sequence_gap, snapshot_mismatch, ownership_mismatch {proxy_ids})
assert(#KEYS == 1 and #ARGV == 4, 'write_report: arity')
local report, body, ttl, budget = cjson.decode(ARGV[1]), ARGV[2], tonum(ARGV[3]), tonum(ARGV[4])
local w = report.w
local snow = server_ms()
local s, err = session_for_write(w, report.sid, snow)
if err then return err end
if report.seq == s.seq then
  if body == s.dig then return ok({replayed = true, released = {}}) end
  return fail('report_rejected', 'sequence_conflict')
end
if report.seq < s.seq then return fail('report_rejected', 'sequence_regression') end
if report.seq ~= s.seq + 1 then return fail('report_rejected', 'sequence_gap') end
if not s.ack or report.sv ~= s.ack.v or report.ep ~= s.ack.e then
  return fail('report_rejected', 'snapshot_mismatch')
end
local foreign = {}
local entries = {}
for _, e in ipairs(report.en) do
  local pid, epoch, active, reserved = e[1], e[2], e[3], e[4]
  entries[pid] = e
  if active > 0 or reserved > 0 then
    local owner = get_owner(pid)
    if not owner or owner.w ~= w or owner.e ~= epoch then foreign[#foreign + 1] = pid end
  end
end
if #foreign > 0 then
  table.sort(foreign)
  local named = {}
  for i = 1, math.min(#foreign, 20) do named[i] = foreign[i] end
  return fail('report_rejected', 'ownership_mismatch', {proxy_ids = named})
end
local rt = {sid = report.sid, seq = report.seq, sv = report.sv, ep = report.ep, en = entries,
            x = snow + ttl, at = snow}  -- at: when it was taken (the console's report age)
hset(RT, w, cjson.encode(rt))
zadd(RT_EXP, rt.x, w)
extend(RT, ttl + GRACE_MS); extend(RT_EXP, ttl + GRACE_MS)
s.seq, s.dig = report.seq, body
hset(SESS, w, cjson.encode(s))
local released = {}
local known = {session = s, rt = rt}
for _, pid in ipairs(zread('ZRANGE', worker_draining_key(w), 0, budget - 1)) do
  if drain_status(pid, w, false, snow, known) == 'released' then released[#released + 1] = pid end
end
for _, pid in ipairs(released) do release(pid) end
finish_like_records()
table.sort(released)
return ok({replayed = false, released = released})
