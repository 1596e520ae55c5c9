-- report_outcome.lua: the extracting client reports how a proxy went; a ban quarantines its
-- exit (the record's unique-key digest) for the target host, or for every host ("*").
-- KEYS[1] <prefix>:{activity}:meta
-- ARGV[1] now (caller clock, ms)   ARGV[2] client ID   ARGV[3] proxy ID
-- ARGV[4] outcome (ok, banned, timeout, auth_failed)   ARGV[5] target host ('' for none)
-- ARGV[6] quarantine end ms, later than now ('' when the report quarantines nothing)
-- ARGV[7] clean_budget (ended quarantine entries this call removes first)
-- ARGV[8] suspect_after_failures (0: off)   ARGV[9] failure_window ms
-- Passive health, by exit too: timeout and auth_failed count against the exit in a window from
-- the first ("<digest>|#" = "count|window end"); at the threshold the exit is suspect for a
-- window from then ("<digest>|!" = its end; a longer suspicion stands), and upsert.lua enters its
-- new lifecycles SUSPECT; ok clears both. Both entries live in the quarantine hash and its
-- expiry index (cleaned with the quarantines), never in quarantine-exits (not a banned host).
-- The pair in Python: activity/memory/outcomes.py `_count_failure`.
-- Returns: {"ok": {u: upstream ID, o: outcome, h: host or '', q: quarantine end ms or '',
--          r: replayed, s: suspect until ms or ''}}
-- Errors: outcome_rejected (not_found, conflict), layout_mismatch
assert(#KEYS == 1 and #ARGV == 9, 'report_outcome: arity')
local now, client, pid = tonum(ARGV[1]), ARGV[2], ARGV[3]
local outcome, host, ends = ARGV[4], ARGV[5], tonum(ARGV[6])
local threshold, window = tonum(ARGV[8]), tonum(ARGV[9])

-- Ended quarantine entries first, a bounded number of them (sweep removes the rest).
clean_quarantines(now, tonum(ARGV[7]))

-- Unknown, past its hard expiry, not extracted or extracted by another client: one answer,
-- so a client never learns anything about another client's proxies.
local rec = get_rec(pid)
if not rec or rec.e <= now or rec.x ~= client then
  return fail('outcome_rejected', 'not_found')
end

-- One outcome per proxy, stored as "outcome|host|quarantine end": the same report replays.
local count_entry, suspect_entry = rec.k .. '|#', rec.k .. '|!'
local function suspect_until()
  local ending = tonumber(hget(QUAR, suspect_entry) or '0')
  if ending > now then return string.format('%d', ending) end
  return ''
end

local stored = hget(OUTCOMES, pid)
if stored then
  local o, h, q = string.match(stored, '^([^|]*)|([^|]*)|(.*)$')
  if o ~= outcome or h ~= host then return fail('outcome_rejected', 'conflict') end
  return ok({u = rec.u, o = o, h = h, q = q, r = true, s = suspect_until()})
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
local longest = ends  -- the latest end of an entry this call writes (key lifetimes)
if outcome == 'ok' then
  for _, entry in ipairs({count_entry, suspect_entry}) do
    hdel(QUAR, entry)
    zrem(QUAR_EXP, entry)
  end
elseif (outcome == 'timeout' or outcome == 'auth_failed') and threshold > 0 then
  local count, window_end = 0, 0
  local raw = hget(QUAR, count_entry)
  if raw then
    local c, e = string.match(raw, '^(%d+)|(%d+)$')
    count, window_end = tonumber(c), tonumber(e)
  end
  if window_end <= now then count, window_end = 0, now + window end
  count = count + 1
  hset(QUAR, count_entry, string.format('%d|%d', count, window_end))
  zadd(QUAR_EXP, window_end, count_entry)
  longest = math.max(longest or 0, window_end)
  if count >= threshold then
    local ending = math.max(tonumber(hget(QUAR, suspect_entry) or '0'), now + window)
    hset(QUAR, suspect_entry, string.format('%d', ending))
    zadd(QUAR_EXP, ending, suspect_entry)
    longest = math.max(longest, ending)
  end
end

hset(OUTCOMES, pid, table.concat({outcome, host, q}, '|'))
touch(OUTCOMES)  -- lives with the records (delete_rec removes an entry with its record)
finish(now)
if longest then  -- a quarantine may outlive every record (the pool's horizon): keys live to it
  for _, key in ipairs({QUAR, QUAR_EXP, QUAR_EXITS}) do extend(key, longest - now + GRACE_MS) end
end
return ok({u = rec.u, o = outcome, h = host, q = q, r = false, s = suspect_until()})
