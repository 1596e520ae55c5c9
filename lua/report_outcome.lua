-- report_outcome.lua: the extracting client reports how a proxy went; a ban quarantines its
-- exit (the record's unique-key digest) for the target host, or for every host ("*").
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (caller clock, ms)   ARGV[2] client ID   ARGV[3] proxy ID
-- ARGV[4] outcome (ok, banned, timeout, auth_failed)   ARGV[5] target host ('' for none)
-- ARGV[6] quarantine end ms, later than now ('' when the report quarantines nothing)
-- ARGV[7] clean_budget (ended quarantine entries this call removes first)
-- Returns: {"ok": {u: upstream ID, o: outcome, h: host or '', q: quarantine end ms or '',
--          r: replayed}}
-- Errors: outcome_rejected (not_found, conflict), layout_mismatch
assert(#KEYS == 1 and #ARGV == 7, 'report_outcome: arity')
local now, client, pid = tonum(ARGV[1]), ARGV[2], ARGV[3]
local outcome, host, ends = ARGV[4], ARGV[5], tonum(ARGV[6])

-- Ended quarantine entries first, a bounded number of them (sweep removes the rest).
clean_quarantines(now, tonum(ARGV[7]))

-- Unknown, past its hard expiry, not extracted or extracted by another client: one answer,
-- so a client never learns anything about another client's proxies.
local rec = get_rec(pid)
if not rec or rec.e <= now or rec.x ~= client then
  return fail('outcome_rejected', 'not_found')
end

-- One outcome per proxy, stored as "outcome|host|quarantine end": the same report replays.
local stored = hget(OUTCOMES, pid)
if stored then
  local o, h, q = string.match(stored, '^([^|]*)|([^|]*)|(.*)$')
  if o ~= outcome or h ~= host then return fail('outcome_rejected', 'conflict') end
  return ok({u = rec.u, o = o, h = h, q = q, r = true})
end

local q = ''
if ends then
  local entry = rec.k .. '|' .. (host ~= '' and host or '*')
  local current = tonumber(hget(QUAR, entry) or '0')
  if current > ends then ends = current end  -- a longer quarantine stands
  q = string.format('%d', ends)
  hset(QUAR, entry, q)
  zadd(QUAR_EXP, ends, entry)
  zadd(QUAR_EXITS, 0, entry)  -- all scores 0: read by exit with ZRANGEBYLEX
end
hset(OUTCOMES, pid, table.concat({outcome, host, q}, '|'))
touch(OUTCOMES)  -- lives with the records (delete_rec removes an entry with its record)
finish(now)
if ends then  -- a quarantine may outlive every record (the pool's horizon): keys live to its end
  for _, key in ipairs({QUAR, QUAR_EXP, QUAR_EXITS}) do extend(key, ends - now + GRACE_MS) end
end
return ok({u = rec.u, o = outcome, h = host, q = q, r = false})
